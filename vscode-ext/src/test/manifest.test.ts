// package.json's contributions: what the issue asks the extension to contribute.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));
const c = pkg.contributes;
const dbg = c.debuggers[0];

test('the debugger type graph-dap, labelled ONNX Graph, for the listing language', () => {
	assert.equal(dbg.type, 'graph-dap');
	assert.equal(dbg.label, 'ONNX Graph');
	assert.deepEqual(dbg.languages, ['onnx-listing']);
	// listings, and Python files: a program launch takes the program's own breakpoints (without the Python extension)
	assert.deepEqual(c.breakpoints, [{ language: 'onnx-listing' }, { language: 'python' }]);
	assert.ok(dbg.initialConfigurations.length > 0 && dbg.configurationSnippets.length > 0);
});

test('all launch attributes; a model or a program (the resolver says which is missing)', () => {
	const launch = dbg.configurationAttributes.launch;
	assert.equal(launch.required, undefined);
	for (const key of ['model', 'inputs', 'dims', 'stopOnEntry', 'providers', 'skipConstants', 'memoryBudgetMB', 'worker', 'token', 'debugServer',
		'program', 'module', 'args', 'env', 'stopOnSessionRun']) {
		assert.ok(launch.properties[key], key);
	}
});

test('snippets and initial configurations are valid configurations', () => {
	for (const body of [...dbg.initialConfigurations, ...dbg.configurationSnippets.map((s: { body: unknown }) => s.body)]) {
		assert.equal(body.type, 'graph-dap');
		assert.equal(body.request, 'launch');
		assert.ok(body.model || body.program);
		for (const key of Object.keys(body)) {
			assert.ok(['type', 'request', 'name'].includes(key) || dbg.configurationAttributes.launch.properties[key], `unknown attribute ${key}`);
		}
	}
});

test('every menu item names a contributed command', () => {
	const commands = new Set(c.commands.map((x: { command: string }) => x.command));
	for (const [menu, items] of Object.entries(c.menus) as [string, { command: string }[]][]) {
		for (const item of items) {
			assert.ok(commands.has(item.command), `${menu}: ${item.command}`);
		}
	}
	const explorer = c.menus['explorer/context'].map((x: { command: string }) => x.command);
	assert.ok(explorer.includes('graphDap.debugModel') && explorer.includes('graphDap.runModel'));
	assert.deepEqual(
		c.commands.filter((x: { command: string }) => ['graphDap.debugModel', 'graphDap.runModel', 'graphDap.viewTensor'].includes(x.command)).map((x: { title: string }) => x.title),
		['Debug ONNX Model', 'Run ONNX Model', 'View Tensor'],
	);
	assert.ok(c.menus['debug/variables/context'].some((x: { command: string }) => x.command === 'graphDap.viewTensor'));
});

test('the listing language: .onnxtxt, a grammar, read-only by default', () => {
	assert.deepEqual(c.languages[0].extensions, ['.onnxtxt']);
	assert.equal(c.grammars[0].language, 'onnx-listing');
	assert.deepEqual(c.configurationDefaults['files.readonlyInclude'], { '**/*.onnxtxt': true });
	assert.equal(c.customEditors[0].selector[0].filenamePattern, '*.onnx');
});

test('the setting graphDap.python defaults to empty (the Python extension, else python3)', () => {
	assert.equal(c.configuration.properties['graphDap.python'].default, '');
	assert.equal(c.configuration.properties['graphDap.warmStart'].default, true);
	assert.equal(pkg.main, './dist/extension.js');
});

test('the language server settings and commands', () => {
	const props = c.configuration.properties;
	assert.equal(props['graphDap.languageServer'].default, true);
	assert.deepEqual(props['graphDap.listing.providers'].default, ['CPUExecutionProvider']);
	assert.equal(props['graphDap.listing.liveInlayHints'].default, false);
	assert.equal(props['graphDap.listing.codeLens'].default, false);
	const commands = new Set(c.commands.map((x: { command: string }) => x.command));
	for (const command of ['graphDap.runToNode', 'graphDap.breakOnOpType', 'graphDap.restartLanguageServer']) {
		assert.ok(commands.has(command), command);
	}
	assert.ok(pkg.devDependencies['vscode-languageclient'], 'vscode-languageclient is bundled');
});

test('the scan: its command on a .onnx in the explorer, its tree view in Run and Debug, the launch attributes it replays with', () => {
	const commands = new Map(c.commands.map((x: { command: string; title: string; category: string }) => [x.command, `${x.category}: ${x.title}`]));
	assert.equal(commands.get('graphDap.scanInputs'), 'graph-dap: Scan Inputs...');
	assert.ok(c.menus['explorer/context'].some((x: { command: string; when: string }) => x.command === 'graphDap.scanInputs' && x.when === 'resourceExtname == .onnx'));
	assert.deepEqual(c.views.debug.map((v: { id: string }) => v.id), ['graphDap.scanResults']);
	assert.ok(c.viewsWelcome.some((w: { view: string; contents: string }) => w.view === 'graphDap.scanResults' && w.contents.includes('command:graphDap.scanInputs')));
	const launch = dbg.configurationAttributes.launch.properties;
	assert.deepEqual(launch.breakOn.items.enum, ['nan', 'inf', 'error', 'mismatch']);
	assert.ok(launch.infExclude);
});
