#!/usr/bin/env node
// The extension end to end in a real VS Code: code-server with the built .vsix, driven in
// Debian's Chromium by playwright-core. Installs what it needs first (scripts/setup-e2e.sh,
// idempotent). The scenario: open the example model (its listing shows), the listing's language
// server (the Sqrt(Sub(...)) warning in Problems, a hover with a value's shape, F12 to its producer,
// the outline), set a gutter breakpoint, F5 without a launch.json, paused at the node, the call stack and a tensor in
// Variables, step, open the tensor viewer, step again (the viewer follows), continue to the end;
// then "Run ONNX Model" from the explorer, a breakpoint inside a Loop's body, a breakpoint on a line of a
// PyTorch model's Python source (it stops there, the Python frames under the node),
// then "Scan Inputs..." on the model (a scan cancelled from its progress
// notification, then one that ends: the tree of failing inputs, one debugged to its first bad node, the report
// drawn in a webview and in Chromium); a Python program launched with "program" (a Python breakpoint,
// then the graph stopped in its run call with both threads in the call stack); and a "debugServer" launch against
// `python -m graph_dap.adapter --port 0`. Then the DAP traffic that VS Code really sent and received (the extension's tracker writes it
// to an output channel, which lands on disk) is checked.
//
// Screenshots go to e2e-artifacts/. Exit status 0 when every check passed, 1 otherwise.
// Options: --no-setup, --no-build, --keep (keep the temp folder), --until=listing|breakpoint
// (stop early: for a machine without the adapter).
// Environment: GRAPH_DAP_PYTHON (default python3), GRAPH_DAP_E2E_CACHE (see setup-e2e.sh).

import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = join(here, '..');
const artifacts = join(here, 'e2e-artifacts');
const opts = new Set(process.argv.slice(2).filter((a) => !a.startsWith('--until=')));
const until = (process.argv.find((a) => a.startsWith('--until=')) ?? '--until=end').slice(8);
// The interpreter by its absolute path (code-server's PATH may differ).
const python = spawnSync(process.env.GRAPH_DAP_PYTHON || 'python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout?.trim() || 'python3';
const exampleModel = join(repo, 'examples', 'nan_demo.onnx');
const t0 = Date.now();

const log = (...a) => console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`, ...a);
class Failure extends Error {}
const fail = (msg) => {
	throw new Failure(msg);
};
const checks = { passed: 0, failed: 0 };
function check(ok, what) {
	if (ok) {
		checks.passed++;
		log(`ok   ${what}`);
	} else {
		checks.failed++;
		log(`FAIL ${what}`);
	}
	return ok;
}
function run(cmd, args, options = {}) {
	const r = spawnSync(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...options });
	if (r.status !== 0) {
		fail(`${cmd} ${args.join(' ')} failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ''})`);
	}
	return r.stdout;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until_(what, fn, timeoutMs = 30000, everyMs = 250) {
	const end = Date.now() + timeoutMs;
	let last;
	while (Date.now() < end) {
		try {
			last = await fn();
			if (last) return last;
		} catch (e) {
			last = e;
		}
		await sleep(everyMs);
	}
	fail(`timed out after ${timeoutMs / 1000}s waiting for ${what}${last instanceof Error ? ` (${last.message.split('\n')[0]})` : ''}`);
}
function freePort() {
	return new Promise((resolve, reject) => {
		const s = createServer();
		s.once('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

// --- setup ------------------------------------------------------------------------------
function setup() {
	if (!opts.has('--no-setup')) {
		log('setup (scripts/setup-e2e.sh; skips what is done)');
		run('bash', [join(here, 'scripts', 'setup-e2e.sh')]);
	}
	const cache = process.env.GRAPH_DAP_E2E_CACHE || join(process.env.HOME || tmpdir(), '.cache', 'graph-dap-e2e');
	const env = {};
	for (const line of readFileSync(join(cache, 'env.sh'), 'utf8').split('\n')) {
		const m = /^export (\w+)="(.*)"$/.exec(line);
		if (m) env[m[1]] = m[2];
	}
	if (!env.GRAPH_DAP_CODE_SERVER || !existsSync(env.GRAPH_DAP_CODE_SERVER)) fail(`code-server is not installed in ${cache}: run scripts/setup-e2e.sh`);
	if (!opts.has('--no-build')) {
		log('build and package the extension');
		run('npm', ['run', '--silent', 'package'], { cwd: here, stdio: ['ignore', 'ignore', 'inherit'] });
	}
	const vsix = join(here, 'dist', 'graph-dap.vsix');
	if (!existsSync(vsix)) fail(`${vsix} is missing: run npm run package`);
	const probe = spawnSync(python, ['-c', 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("graph_dap") else 3)']);
	if (probe.status !== 0) fail(`graph_dap is not importable by ${python}: pip install -e ${repo} (or set GRAPH_DAP_PYTHON)`);
	const adapter = spawnSync(python, ['-c', 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("graph_dap.adapter.__main__") else 3)']);
	const hasAdapter = adapter.status === 0;
	if (!hasAdapter && until === 'end') fail(`${python} has graph_dap but no graph_dap/adapter/__main__.py yet: the adapter is needed (or run with --until=breakpoint)`);
	if (!existsSync(exampleModel)) fail(`the example model ${exampleModel} is missing (examples/make_example.py builds it)`);
	return { codeServer: env.GRAPH_DAP_CODE_SERVER, nodeBin: env.GRAPH_DAP_NODE24_BIN, vsix };
}

// --- code-server ------------------------------------------------------------------------
function quietSettings(extra) {
	return {
		'workbench.startupEditor': 'none',
		'workbench.secondarySideBar.defaultVisibility': 'hidden',
		'chat.disableAIFeatures': true,
		'workbench.tips.enabled': false,
		'telemetry.telemetryLevel': 'off',
		'extensions.autoCheckUpdates': false,
		'extensions.autoUpdate': false,
		'update.mode': 'none',
		'security.workspace.trust.enabled': false,
		'window.restoreWindows': 'none',
		'workbench.enableExperiments': false,
		'debug.openDebug': 'openOnDebugBreak',
		...extra,
	};
}

async function startCodeServer(tools, tmp, ws) {
	const dirs = { data: join(tmp, 'data'), ext: join(tmp, 'extensions'), xdg: join(tmp, 'xdg') };
	Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
	mkdirSync(join(dirs.data, 'User'), { recursive: true });
	writeFileSync(join(dirs.data, 'User', 'settings.json'), JSON.stringify(quietSettings({ 'graphDap.python': python, 'graphDap.trace': true }), null, 2));
	const port = await freePort();
	const cfg = join(tmp, 'code-server.yaml');
	writeFileSync(cfg, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
	const env = {
		...process.env,
		PATH: `${tools.nodeBin}:${process.env.PATH}`,
		XDG_CONFIG_HOME: join(dirs.xdg, 'config'),
		XDG_DATA_HOME: join(dirs.xdg, 'data'),
		XDG_CACHE_HOME: join(dirs.xdg, 'cache'),
	};
	const common = ['--config', cfg, '--user-data-dir', dirs.data, '--extensions-dir', dirs.ext];
	log('install the .vsix into code-server');
	run(tools.codeServer, [...common, '--install-extension', tools.vsix], { env, stdio: ['ignore', 'ignore', 'inherit'] });
	const out = join(artifacts, 'code-server.log');
	const fd = openSync(out, 'w');
	// detached: its own session and process group (setsid), killed whole at the end.
	const child = spawn(
		tools.codeServer,
		[
			...common,
			'--bind-addr',
			`127.0.0.1:${port}`,
			'--auth',
			'none',
			'--disable-telemetry',
			'--disable-update-check',
			'--disable-workspace-trust',
			'--reconnection-grace-time',
			'5',
			ws,
		],
		{ env, detached: true, stdio: ['ignore', fd, fd] },
	);
	const server = { child, port, dirs, exited: false };
	child.on('exit', () => (server.exited = true));
	await until_('code-server /healthz', async () => {
		if (server.exited) fail(`code-server exited; see ${out}`);
		const r = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
		return r?.ok;
	}, 60000);
	log(`code-server is up on port ${port}`);
	return server;
}

async function stopProcessGroup(child) {
	if (!child || child.exitCode !== null) return;
	try {
		process.kill(-child.pid, 'SIGTERM');
	} catch {
		return;
	}
	for (let i = 0; i < 20 && child.exitCode === null; i++) await sleep(100);
	try {
		process.kill(-child.pid, 'SIGKILL');
	} catch {
		// already gone
	}
}

// --- the DAP log ------------------------------------------------------------------------
function findFiles(dir, test, out = []) {
	if (!existsSync(dir)) return out;
	for (const name of readdirSync(dir)) {
		const p = join(dir, name);
		if (statSync(p).isDirectory()) findFiles(p, test, out);
		else if (test(p)) out.push(p);
	}
	return out;
}

function readDapLog(dataDir) {
	const files = findFiles(join(dataDir, 'logs'), (p) => /output_logging_/.test(p) && /graph-dap DAP/.test(p));
	const messages = [];
	for (const f of files) {
		for (const line of readFileSync(f, 'utf8').split('\n')) {
			const m = /\[([^\]]+)\] (-->|<--) (\{.*\})\s*$/.exec(line);
			if (m) messages.push({ session: m[1], dir: m[2], msg: JSON.parse(m[3]) });
		}
	}
	return { files, messages };
}

// --- the scenario -----------------------------------------------------------------------
async function scenario(page, ws, server) {
	let n = 0;
	const shot = async (name) => {
		const file = join(artifacts, `${String(++n).padStart(2, '0')}-${name}.png`);
		await page.screenshot({ path: file });
		log(`screenshot ${file}`);
	};
	const visible = (selector, options = {}) => page.locator(selector, options).first().waitFor({ state: 'visible', timeout: options.timeout ?? 30000 });
	const text = async (selector) => (await page.locator(selector).allInnerTexts()).join('\n');
	const model = join(ws, 'nan_demo.onnx');
	const listing = join(ws, 'nan_demo.onnxtxt');

	await page.goto(`http://127.0.0.1:${server.port}/?folder=${encodeURIComponent(ws)}`);
	await visible('.monaco-workbench .explorer-folders-view', { timeout: 60000 });
	log('the workbench is ready');
	await sleep(1000);

	// 1. Open the model: its listing shows, read-only, coloured.
	await page.keyboard.press('Control+P');
	await visible('.quick-input-widget input');
	await page.keyboard.type('nan_demo.onnx');
	await visible('.quick-input-list .monaco-list-row', { hasText: 'nan_demo.onnx' });
	await sleep(300);
	await page.keyboard.press('Enter');
	await visible('.tabs-container .tab.active', { hasText: 'nan_demo.onnxtxt', timeout: 60000 });
	await visible('.editor-instance .view-lines', { hasText: '# graph-dap listing of nan_demo.onnx' });
	check(existsSync(listing), 'opening nan_demo.onnx wrote nan_demo.onnxtxt beside it and showed it');
	const listingText = readFileSync(listing, 'utf8');
	const expected = spawnSync(python, ['-m', 'graph_dap', 'listing', model], { encoding: 'utf8' }).stdout;
	check(listingText === expected, 'the listing file is what `python -m graph_dap listing` prints');
	const classes = await page.locator('.editor-instance .view-lines span[class^="mtk"]').evaluateAll((els) => [...new Set(els.map((e) => e.className))]);
	check(classes.length >= 5, `the listing is coloured (${classes.length} token colours)`);
	check(/onnx graph listing/i.test(await text('.statusbar-item[id="status.editor.mode"]')), 'the status bar shows the language "ONNX Graph Listing"');
	// Read-only: typing changes nothing.
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+Home');
	await page.keyboard.type('zz');
	await page.keyboard.press('Control+S');
	await sleep(500);
	check(readFileSync(listing, 'utf8') === listingText && !(await text('.editor-instance .view-lines')).startsWith('zz'), 'the listing is read-only');
	await shot('listing');
	if (until === 'listing') return;

	// 1b. The listing's language server: the Sqrt(Sub(...)) warning in Problems, a hover with the
	// value's shape, F12 to its producer, the outline. A failure is recorded and the scenario goes on.
	await languageServerSteps(page, listingText, shot).catch(async (e) => {
		check(false, e.message.split('\n')[0]);
		await shot('language-server-failure');
		await page.keyboard.press('Escape');
	});

	// 2. A gutter breakpoint on the Sqrt node (norm/std), before any session.
	const lines = listingText.split('\n');
	const bpLine = lines.findIndex((l) => /#\s*norm\/std\b/.test(l)) + 1;
	if (bpLine < 1) fail('no line for node norm/std in the listing');
	await page.keyboard.press('Control+G');
	await visible('.quick-input-widget input');
	await page.keyboard.type(String(bpLine));
	await page.keyboard.press('Enter');
	await sleep(300);
	await page.keyboard.press('F9');
	await visible('.editor-instance .codicon-debug-breakpoint');
	check(true, `a gutter breakpoint on line ${bpLine} (norm/std)`);
	await shot('breakpoint');

	// 2b. An interpreter without graph_dap: F5 says so, and how to install it.
	const settingsFile = join(server.dirs.data, 'User', 'settings.json');
	const settings = readFileSync(settingsFile, 'utf8');
	writeFileSync(settingsFile, JSON.stringify({ ...JSON.parse(settings), 'graphDap.python': '/nonexistent/bin/python3' }, null, 2));
	await sleep(1500);
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('F5');
	const toast = page.locator('.notification-toast', { hasText: '/nonexistent/bin/python3' }).first();
	await toast.waitFor({ state: 'visible', timeout: 30000 });
	check(/was not found/.test(await toast.innerText()), 'F5 with a missing interpreter: a clear message naming it');
	await sleep(500);
	await shot('no-interpreter');
	await toast.locator('.codicon-notifications-clear').first().click().catch(() => undefined);
	writeFileSync(settingsFile, settings);
	await sleep(1500);
	check(!(await page.locator('.debug-toolbar').isVisible()), 'and no session started');
	if (until === 'breakpoint') return;

	// 3. F5, no launch.json: paused at the breakpoint.
	await page.keyboard.press('F5');
	const picker = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'ONNX Graph' }).first();
	const first = await Promise.race([
		page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 }).then(() => 'toolbar'),
		picker.waitFor({ state: 'visible', timeout: 60000 }).then(() => 'picker'),
	]);
	check(first === 'toolbar', 'F5 started a session without asking which debugger');
	if (first === 'picker') await picker.click();
	await visible('.debug-toolbar', { timeout: 60000 });
	await visible('.debug-call-stack .monaco-list-row', { hasText: 'norm/std', timeout: 60000 });
	check(true, 'paused: the call stack shows norm/std');
	await visible('.editor-instance .debug-top-stack-frame-line');
	const expandScopes = async () => {
		for (const row of await page.locator('.debug-variables .monaco-list-row[aria-expanded="false"]').all()) {
			const label = await row.innerText({ timeout: 1000 }).catch(() => '');
			if (/^(Inputs|Last outputs)/.test(label)) await row.click({ timeout: 1000 }).catch(() => undefined);
		}
	};
	await until_('a tensor with its shape and statistics in Variables', async () => {
		await expandScopes();
		return /float32\[[\d,\s]+\].*min=.*max=/.test(await text('.debug-variables .monaco-list-row'));
	});
	check(true, 'Variables show a tensor with its shape and statistics');
	await shot('paused-at-breakpoint');
	// 3b. While stopped, the language server's hover on a computed value has its live summary (the server asks
	// the extension, which asks the adapter's graphDap/summaries). A failure is recorded and the scenario goes on.
	await liveHoverStep(page, listingText, shot).catch(async (e) => {
		if (!(e instanceof Failure)) throw e;
		check(false, e.message);
		await shot('live-hover-failure');
		await page.keyboard.press('Escape');
	});

	// 4. Step once.
	const stepOver = page.locator('.debug-toolbar .codicon-debug-step-over').first();
	await stepOver.click();
	await visible('.debug-call-stack .monaco-list-row', { hasText: 'norm/scale', timeout: 30000 });
	check(true, 'a step: the call stack shows norm/scale');
	await shot('after-step');

	// 5. The tensor viewer, from the Variables view's context menu on norm_std (it holds NaN).
	// A failure here is recorded and the scenario goes on, so that the steps after it are tried.
	await viewerSteps(page, server, shot, expandScopes, stepOver).catch(async (e) => {
		if (!(e instanceof Failure)) throw e;
		check(false, e.message);
		await shot('viewer-failure');
	});

	// 7. Continue to the end (a NaN/Inf stop on the way is continued too).
	await continueToEnd(page);
	check(true, 'continued to the end: the session is over');
	check(!existsSync(join(ws, '.vscode', 'launch.json')), 'no launch.json was written');
	await sleep(500);
	await shot('ended');

	await runFromExplorer(page, server, shot);
	await controlFlowSteps(page, ws, shot, server).catch(async (e) => {
		if (!(e instanceof Failure)) throw e;
		check(false, e.message);
		await shot('control-flow-failure');
	});
	await sourceSteps(page, ws, shot).catch(async (e) => {
		check(false, e.message.split('\n')[0]);
		await shot('source-failure');
		await page.locator('.debug-toolbar .codicon-debug-stop').first().click({ timeout: 5000 }).catch(() => undefined);
	});
	// 8c. graph-dap: Scan Inputs... A failure is recorded and the scenario goes on.
	await scanSteps(page, server, ws, shot).catch(async (e) => {
		if (!(e instanceof Failure)) throw e;
		check(false, e.message);
		await shot('scan-failure');
		await page.keyboard.press('Escape');
	});
	await mixedModeSteps(page, ws, shot).catch(async (e) => {
		if (!(e instanceof Failure)) throw e;
		check(false, e.message);
		await shot('mixed-mode-failure');
	});
	await debugServerVariant(page, server, ws, shot);
}

/** The pids of the graph-dap adapters on stdio under code-server (not pytest's, which may run beside this test). */
function stdioAdapters(server) {
	const parent = new Map();
	const adapters = [];
	for (const entry of readdirSync('/proc')) {
		if (!/^\d+$/.test(entry)) continue;
		try {
			const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
			parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
			const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
			if (argv.includes('graph_dap.adapter') && !argv.includes('--port')) adapters.push(Number(entry));
		} catch {
			// gone meanwhile
		}
	}
	const under = (pid) => {
		for (let p = pid, hops = 0; p > 1 && hops < 64; p = parent.get(p) ?? 0, hops++) {
			if (p === server.child.pid) return true;
		}
		return false;
	};
	return adapters.filter(under);
}

async function controlFlowSteps(page, ws, shot, server) {
	// 8a. The sessions before this one ended: the extension has started the next session's adapter ahead.
	// (The same one twice, 1.5 s apart: the last session's own adapter may still be on its way out.)
	let waiting = [];
	await until_('an adapter started ahead for the next session', async () => {
		const first = stdioAdapters(server);
		await sleep(1500);
		waiting = stdioAdapters(server);
		return first.length === 1 && waiting.length === 1 && first[0] === waiting[0];
	}, 30000);
	// 8b. Inside control flow: a breakpoint on a line inside a Loop's body, F5: the call stack has two levels.
	await openFile(page, 'loop.onnx', 'loop.onnxtxt');
	const lines = readFileSync(join(ws, 'loop.onnxtxt'), 'utf8').split('\n');
	const line = lines.findIndex((l) => /#\s*tanh$/.test(l.trimEnd())) + 1;
	if (line < 1) fail('no line for the inner node tanh in the listing of loop.onnx');
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(String(line));
	await page.keyboard.press('Enter');
	await sleep(300);
	await page.keyboard.press('F9');
	await sleep(500);
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'tanh (Tanh)' }).first().waitFor({ state: 'visible', timeout: 60000 });
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'loop (Loop) body, iteration 0' }).first().waitFor({ state: 'visible', timeout: 30000 });
	const rows = await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts();
	check(rows.some((r) => r.includes('tanh (Tanh)')) && rows.some((r) => r.includes('loop (Loop) body, iteration 0')), `a breakpoint inside a Loop's body: the call stack shows two levels (${rows.filter((r) => r.includes('(')).length} frames)`);
	await shot('control-flow-two-levels');
	const serving = stdioAdapters(server);
	check(serving.length === 1 && serving[0] === waiting[0], `the session took the adapter started ahead (pid ${waiting[0]}; adapters now: ${serving.join(', ') || 'none'})`);
	await page.locator('.debug-toolbar .codicon-debug-stop, .debug-toolbar .codicon-debug-disconnect').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

/** Quick Open (Ctrl+P) on `name`, then wait for its editor tab (`tab`) to be the active one. */
async function openFile(page, name, tab = name, timeout = 60000) {
	await page.keyboard.press('Control+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(name);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().waitFor({ state: 'visible' });
	await sleep(300);
	await page.keyboard.press('Enter');
	await page.locator('.tabs-container .tab.active', { hasText: tab }).first().waitFor({ state: 'visible', timeout });
}

async function sourceSteps(page, ws, shot) {
	// 8c. A model exported from PyTorch: a breakpoint on a line of its Python source, F5 on the model:
	// it stops there, the editor shows tinymodel.py at that line, the call stack has the Python frames under the node.
	const source = readFileSync(join(ws, 'tiny', 'tinymodel.py'), 'utf8').split('\n');
	const line = source.findIndex((l) => l.includes('F.softmax(')) + 1;
	await openFile(page, 'tinymodel.py');
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(String(line));
	await page.keyboard.press('Enter');
	await sleep(300);
	await page.keyboard.press('F9');
	await page.locator('.editor-instance .codicon-debug-breakpoint').first().waitFor({ state: 'visible' });
	await openFile(page, 'tiny_dynamo.onnx', 'tiny_dynamo.onnxtxt');
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	const row = (text) => page.locator('.debug-call-stack .monaco-list-row', { hasText: text }).first();
	await row('node_softmax (Softmax)').waitFor({ state: 'visible', timeout: 60000 });
	await row('TinyModel.forward').waitFor({ state: 'visible', timeout: 30000 });
	const rows = (await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts()).map((r) => r.replace(/\s+/g, ' ').trim());
	const at = (text) => rows.findIndex((r) => r.includes(text));
	check(at('node_softmax') >= 0 && at('node_softmax') < at('Attention.forward') && at('Attention.forward') < at('Block.forward') && at('Block.forward') < at('TinyModel.forward'),
		`a breakpoint on tinymodel.py:${line}: the call stack has the node, then the Python frames (${rows.filter((r) => /forward|Softmax/.test(r)).join(' | ')})`);
	await page.locator('.tabs-container .tab.active', { hasText: 'tinymodel.py' }).first().waitFor({ state: 'visible', timeout: 30000 });
	await until_(`the cursor on line ${line} of tinymodel.py`, async () => new RegExp(`Ln ${line},`).test(await page.locator('.statusbar-item[id="status.editor.selection"]').innerText()), 10000);
	await page.locator('.editor-instance .debug-top-stack-frame-line').first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, `paused: the editor shows tinymodel.py at line ${line}, the top frame's line marked`);
	await page.locator('.debug-variables .monaco-list-row', { hasText: 'Module' }).first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, 'the Python frame has a "Module" scope in Variables');
	await shot('python-source-breakpoint');
	await page.locator('.debug-toolbar .codicon-debug-stop, .debug-toolbar .codicon-debug-disconnect').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

/** The scan's inputs in the workspace: six images (two too flat: Sqrt(var - eps) is NaN there), and a generator that stalls. */
function writeScanInputs(ws, gate) {
	const code = [
		'import numpy as np, os, sys',
		'rng = np.random.default_rng(0)',
		"os.makedirs(sys.argv[1] + '/inputs', exist_ok=True)",
		'for i, s in enumerate([20, 20, 0.1, 20, 0.1, 20]):',
		"    np.savez(f'{sys.argv[1]}/inputs/image_{i}.npz', image=(rng.standard_normal((1, 3, 32, 32)) * s).astype(np.float32))",
	].join('\n');
	run(python, ['-c', code, ws]);
	writeFileSync(join(ws, 'slow_inputs.py'), [
		'"""Two clean images, then waits for a writer on the FIFO gate (nobody writes: the scan is cancelled there)."""',
		'import numpy as np',
		'def images():',
		'    for i in range(2):',
		"        yield {'image': (np.random.default_rng(i).standard_normal((1, 3, 32, 32)) * 20).astype(np.float32)}",
		`    with open(${JSON.stringify(gate)}) as f:`,
		'        f.read()',
		'',
	].join('\n'));
	run('mkfifo', [gate]);
}

async function scanCommand(page, file) {
	await page.keyboard.press('Control+Shift+E');
	await file.waitFor({ state: 'visible', timeout: 10000 });
	await file.click({ button: 'right' });
	const item = page.locator('.context-view .action-menu-item', { hasText: 'Scan Inputs...' }).first();
	await item.waitFor({ state: 'visible', timeout: 10000 });
	await sleep(300);
	await item.hover();
	await item.click();
	await page.locator('.quick-input-widget .monaco-list-row').first().waitFor({ state: 'visible', timeout: 15000 });
}

async function pickAndType(page, choice, text) {
	const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: choice }).first();
	await row.waitFor({ state: 'visible', timeout: 10000 });
	await row.click();
	const input = page.locator('.quick-input-widget input').first();
	await input.waitFor({ state: 'visible', timeout: 10000 });
	await sleep(300);
	await page.keyboard.press('Control+A');
	await page.keyboard.type(text);
	await page.keyboard.press('Enter');
}

async function scanSteps(page, server, ws, shot) {
	const file = page.locator('.explorer-folders-view .monaco-list-row .label-name', { hasText: /^nan_demo\.onnx$/ }).first();
	const out = join(ws, 'nan_demo-scan');
	// A scan that stalls (its generator waits on a FIFO): cancelled from its progress notification.
	await scanCommand(page, file);
	check(true, 'the explorer menu on a .onnx has "Scan Inputs..."; it asks where the inputs are');
	await pickAndType(page, 'A Python generator', 'slow_inputs:images');
	const toast = page.locator('.notification-toast', { hasText: 'scanning nan_demo.onnx' }).first();
	await toast.waitFor({ state: 'visible', timeout: 60000 });
	await until_('two inputs scanned', async () => /2 inputs, 0 failing/.test(await toast.innerText()), 60000, 200);
	check(true, 'a progress notification counts the inputs (2 inputs, 0 failing)');
	await shot('scan-progress');
	await toast.hover();
	await toast.locator('.monaco-button, a.monaco-button', { hasText: 'Cancel' }).first().click();
	const stopped = page.locator('.notification-toast', { hasText: 'graph-dap scan stopped' }).first();
	await stopped.waitFor({ state: 'visible', timeout: 30000 });
	const partial = JSON.parse(readFileSync(join(out, 'scan.json'), 'utf8'));
	check(partial.finished === false && partial.done === 2, `Cancel stops the scan; its results so far stay in scan.json (done ${partial.done}, finished ${partial.finished})`);
	await stopped.locator('.codicon-notifications-clear').first().click().catch(() => undefined);

	// The whole folder, by a glob: two of six images fail at norm/std.
	await scanCommand(page, file);
	await pickAndType(page, 'Files matching a glob', 'inputs/*.npz');
	const done = page.locator('.notification-toast', { hasText: 'graph-dap scan of nan_demo.onnx: 6 inputs, 2 failing' }).first();
	await done.waitFor({ state: 'visible', timeout: 120000 });
	check(true, 'the scan of the six images ends: 6 inputs, 2 failing');
	const group = page.locator('.monaco-list-row', { hasText: 'norm/std (Sqrt)' }).first();
	await group.waitFor({ state: 'visible', timeout: 30000 });
	const rows = await page.locator('.monaco-list-row', { hasText: /^image_\d/ }).allInnerTexts();
	check(/2 inputs: 2 nan/.test(await group.innerText()) && rows.length === 2 && rows.every((r) => /nan in norm_std/.test(r)),
		`the tree groups the failing inputs under their first bad node (${rows.map((r) => r.replace(/\s+/g, ' ')).join('; ')})`);
	await shot('scan-tree');

	// Choosing one debugs it: the session stops at its first bad node (the gutter breakpoint of before removed).
	await runCommand(page, 'Remove All Breakpoints');
	const launchesBefore = readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch').length;
	await page.locator('.monaco-list-row', { hasText: /^image_2/ }).first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'norm/std' }).first().waitFor({ state: 'visible', timeout: 60000 });
	const messages = readDapLog(server.dirs.data).messages;
	const launch = messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch')[launchesBefore];
	const stop = launch && messages.slice(messages.indexOf(launch)).find((m) => m.dir === '<--' && m.msg.event === 'stopped');
	check(launch?.msg.arguments.inputs === join(out, 'failing', 'image_2.npz') && launch.msg.arguments.breakOn.includes('nan'),
		`choosing image_2 launched it from failing/image_2.npz with breakOn ${JSON.stringify(launch?.msg.arguments.breakOn)}`);
	check(stop?.msg.body.reason === 'exception' && stop.msg.body.text === 'NaN', `and it stopped at its first bad node, norm/std (${stop?.msg.body.reason} ${stop?.msg.body.text})`);
	await shot('scan-debug-input');
	await page.locator('.debug-toolbar .codicon-debug-stop').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });

	// The report, in a webview and in Chromium itself: its plots are drawn.
	await runCommand(page, 'View: Close All Editors');
	await runCommand(page, 'graph-dap: Open Scan Report');
	const report = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
	await until_('the report drawn in its webview', async () => (await report.locator('body[data-drawn="1"]').count()) > 0, 30000);
	const bars = await report.locator('#bars rect.bar').count();
	const points = await report.locator('#points circle.point').count();
	check(bars === 1 && points === 4, `the report in a webview: the first-bad-node bar chart (${bars} bar) and a point per clean input (${points})`);
	await shot('scan-report-webview');
	const tab = await page.context().newPage();
	try {
		await tab.goto(`file://${join(out, 'report.html')}`);
		await tab.locator('body[data-drawn="1"]').waitFor({ state: 'attached', timeout: 15000 });
		const drawn = await tab.evaluate(() => ({
			error: document.body.dataset.error ?? null,
			bars: document.querySelectorAll('#bars rect.bar').length,
			width: document.querySelector('#bars rect.bar')?.getBoundingClientRect().width ?? 0,
			points: document.querySelectorAll('#points circle.point').length,
			marks: document.querySelectorAll('#points .fail-mark').length,
			rows: document.querySelectorAll('#failures tbody tr').length,
		}));
		check(!drawn.error && drawn.bars === 1 && drawn.width > 100 && drawn.points === 4 && drawn.marks === 2 && drawn.rows === 2,
			`report.html in Chromium: plots drawn (${JSON.stringify(drawn)})`);
		await tab.screenshot({ path: join(artifacts, 'scan-report.png'), fullPage: true });
	} finally {
		await tab.close();
	}
	// Back to the listing, for the steps after these.
	await runCommand(page, 'View: Close All Editors');
	await page.keyboard.press('Control+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type('nan_demo.onnxtxt');
	await page.locator('.quick-input-list .monaco-list-row', { hasText: 'nan_demo.onnxtxt' }).first().waitFor({ state: 'visible', timeout: 10000 });
	await page.keyboard.press('Enter');
	await page.locator('.editor-instance .view-lines').first().waitFor({ state: 'visible', timeout: 30000 });
}

/** A command by its title, from the command palette. */
async function runCommand(page, title) {
	await page.keyboard.press('Control+Shift+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(title);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ state: 'visible', timeout: 10000 });
	await sleep(200);
	await page.keyboard.press('Enter');
	await sleep(500);
}

async function mixedModeSteps(page, ws, shot) {
	// 8c. A Python program that runs the model, launched with "program": a Python breakpoint in the editor
	// stops the program (debugpy); then the graph stops in its run call (stopOnSessionRun), both threads in the call stack.
	const config = { type: 'graph-dap', request: 'launch', name: 'Program and its model', program: '${workspaceFolder}/infer.py', args: ['${workspaceFolder}/nan_demo.onnx'], stopOnSessionRun: true };
	mkdirSync(join(ws, '.vscode'), { recursive: true });
	writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
	const line = readFileSync(join(ws, 'infer.py'), 'utf8').split('\n').findIndex((l) => l.startsWith('image =')) + 1;
	await openFile(page, 'infer.py', 'infer.py', 30000);
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(String(line));
	await page.keyboard.press('Enter');
	await sleep(300);
	await page.keyboard.press('F9');
	await page.locator('.editor-instance .codicon-debug-breakpoint').first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, `a Python breakpoint in the editor, infer.py line ${line}`);
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await page.locator('.editor-instance .debug-top-stack-frame-line').first().waitFor({ state: 'visible', timeout: 90000 });
	const status = await page.locator('.statusbar-item[id="status.editor.selection"]').innerText();
	check(new RegExp(`Ln ${line},`).test(status), `F5 on the program: paused at the Python breakpoint (${status})`);
	await shot('mixed-python-breakpoint');
	await page.locator('.debug-toolbar .codicon-debug-continue').first().click();
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'graph: nan_demo.onnx, run #1' }).first().waitFor({ state: 'visible', timeout: 90000 });
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'MainThread' }).first().waitFor({ state: 'visible', timeout: 30000 });
	const rows = await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts();
	check(rows.some((r) => r.includes('graph: nan_demo.onnx, run #1')) && rows.some((r) => r.includes('MainThread')), `the graph stopped in run: both threads in the call stack (${rows.map((r) => r.split('\n')[0]).join(' | ')})`);
	await shot('mixed-graph-stop');
	await page.locator('.debug-toolbar .codicon-debug-stop, .debug-toolbar .codicon-debug-disconnect').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
	rmSync(join(ws, '.vscode', 'launch.json'), { force: true });
}

/** Line (1-based) and column (1-based, inside the name) of `name` on the line of node `node`. */
function spotOf(listingText, node, name) {
	const lines = listingText.split('\n');
	const k = lines.findIndex((l) => l.endsWith(`# ${node}`));
	if (k < 0) fail(`no line for node ${node} in the listing`);
	const col = lines[k].indexOf(`(${name}`) + 2;
	if (col < 2) fail(`no ${name} on the line of ${node}`);
	return { line: k + 1, col: col + 2 };
}

async function gotoSpot(page, spot) {
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(`${spot.line}:${spot.col}`);
	await page.keyboard.press('Enter');
	await sleep(300);
}

async function liveHoverStep(page, listingText, shot) {
	await gotoSpot(page, spotOf(listingText, 'norm/std', 'norm_var_eps'));
	// While a session is stopped, VS Code shows its debug hover for the value under the cursor (the adapter's
	// evaluate, context "hover"); the language server's hover has the live summary too (its pytest-lsp scenarios).
	let last = '';
	const text = await until_('the live summary in the hover on norm_var_eps', async () => {
		const t = await hoverText(page, '.monaco-hover:not(.hidden), .debug-hover-widget').catch(() => '');
		last = t || last;
		await page.keyboard.press('Escape');
		return /min=/.test(t) && /float32\[1,8,1,1\]/.test(t) ? t : undefined;
	}, 30000, 500).catch((e) => fail(`${e.message}; the hover said: ${last.replace(/\s+/g, ' ').slice(0, 300)}`));
	const live = text.split('\n').find((l) => /min=/.test(l)) ?? '';
	check(/float32\[1,8,1,1\]/.test(text), `while stopped, the hover on norm_var_eps shows its live summary (${live.trim().slice(0, 100)})`);
	await gotoSpot(page, spotOf(listingText, 'norm/std', 'norm_var_eps'));
	await hoverText(page, '.monaco-hover:not(.hidden), .debug-hover-widget').catch(() => '');
	await shot('live-hover');
	await page.keyboard.press('Escape');
}

/** The editor's hover at the cursor (editor.action.showHover), as text. */
async function hoverText(page, widget = '.monaco-hover:not(.hidden)') {
	await page.keyboard.press('Control+K');
	await page.keyboard.press('Control+I');
	const hover = page.locator(widget).first();
	await hover.waitFor({ state: 'visible', timeout: 10000 });
	return hover.innerText();  // every part: the diagnostic's and the language server's
}

async function languageServerSteps(page, listingText, shot) {
	const lines = listingText.split('\n');
	// Problems: the server's warning on the Sqrt(Sub(...)) line (the server starts and loads the model first).
	await page.keyboard.press('Control+Shift+M');
	const problem = page.locator('.markers-panel .monaco-list-row', { hasText: "Sqrt of 'norm_var_eps'" }).first();
	await problem.waitFor({ state: 'visible', timeout: 90000 });
	const sqrtLine = lines.findIndex((l) => l.endsWith('# norm/std')) + 1;
	const row = await problem.innerText();
	check(/nan-sqrt/.test(row) && new RegExp(`\\[Ln ${sqrtLine},`).test(row), `Problems: the Sqrt(Sub(...)) warning on line ${sqrtLine} (${row.replace(/\s+/g, ' ').slice(0, 120)})`);
	await shot('problems');
	await page.keyboard.press('Control+Shift+M');
	// A hover on norm_var_eps (the Sqrt's input): its type and its producer.
	const spot = spotOf(listingText, 'norm/std', 'norm_var_eps');
	await gotoSpot(page, spot);
	const text = await until_('the hover on norm_var_eps', async () => {
		const t = await hoverText(page).catch(() => '');
		return /float32\[1,8,1,1\]/.test(t) ? t : undefined;
	}, 30000, 500);
	check(/made by norm\/var_eps \(Sub/.test(text), `hover on norm_var_eps: its shape and producer (${text.replace(/\s+/g, ' ').slice(0, 100)})`);
	await shot('hover');
	await page.keyboard.press('Escape');
	// F12: to the producer's line.
	const producerLine = lines.findIndex((l) => l.endsWith('# norm/var_eps')) + 1;
	await page.keyboard.press('F12');
	await until_(`the cursor on line ${producerLine}`, async () => new RegExp(`Ln ${producerLine},`).test(await page.locator('.statusbar-item[id="status.editor.selection"]').innerText()), 10000);
	check(true, `F12 on norm_var_eps went to its producer, line ${producerLine}`);
	// The outline (Go to Symbol in Editor) lists the nodes.
	await page.keyboard.press('Control+Shift+O');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type('norm/s');
	const symbol = page.locator('.quick-input-list .monaco-list-row', { hasText: 'norm/std' }).first();
	await symbol.waitFor({ state: 'visible', timeout: 10000 });
	check(true, 'the outline lists the nodes (norm/std found by Go to Symbol)');
	await shot('outline');
	await page.keyboard.press('Escape');
}

async function continueToEnd(page) {
	for (let i = 0; i < 10 && (await page.locator('.debug-toolbar').isVisible()); i++) {
		const cont = page.locator('.debug-toolbar .codicon-debug-continue').first();
		if (await cont.isVisible()) await cont.click().catch(() => undefined);
		await sleep(1500);
	}
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

async function viewerSteps(page, server, shot, expandScopes, stepOver) {
	const tensorViews = () => readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'graphDap/tensorView').length;
	// Step to pool: "Last outputs" is then norm_out, float32[1,8,32,32], NaN in 5 of its 8 channels.
	await stepOver.click();
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'pool' }).first().waitFor({ state: 'visible', timeout: 30000 });
	const row = await until_('norm_out in Variables', async () => {
		await expandScopes();
		const r = page.locator('.debug-variables .monaco-list-row', { hasText: /^norm_out/ }).first();
		return (await r.count()) ? r : undefined;
	});
	// The bottom panel off, so that the viewer has room.
	if (await page.locator('.part.panel').isVisible()) await page.keyboard.press('Control+J');
	await row.click({ button: 'right' });
	const item = page.locator('.context-view .action-menu-item', { hasText: 'View Tensor' }).first();
	await item.waitFor({ state: 'visible', timeout: 10000 });
	check(true, 'the Variables context menu has "View Tensor" on a tensor');
	await sleep(300);
	await item.hover();
	await item.click();
	await sleep(300);
	if (await item.isVisible()) await page.keyboard.press('Enter');
	const webview = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
	await until_('the tensor viewer', async () => (await webview.locator('#stats td[data-stat="NaN"]').count()) > 0, 30000).catch(async (e) => {
		const status = await webview.locator('#status').innerText({ timeout: 1000 }).catch(() => '(no viewer)');
		fail(`${e.message}; the viewer says: ${status}`);
	});
	const stats = Object.fromEntries(
		await webview.locator('#stats tr').evaluateAll((trs) => trs.map((tr) => [tr.querySelector('th').textContent, tr.querySelector('td').textContent])),
	);
	log('viewer stats', JSON.stringify(stats));
	check(stats.NaN === '5120', `the viewer counts the NaN in norm_out (NaN: ${stats.NaN}, 5 channels of 32x32)`);
	check(['min', 'max', 'mean', '+Inf', '-Inf'].every((k) => k in stats) && stats.shape === '[1, 8, 32, 32]', 'the viewer shows the shape, min, max, mean and the Inf counts');
	const heatmap = async () => webview.locator('#heatmap').evaluate((c) => {
		const px = c.getContext('2d').getImageData(Math.floor(c.width / 2), Math.floor(c.height / 2), 1, 1).data;
		return { w: c.width, h: c.height, rows: Number(c.dataset.rows), cols: Number(c.dataset.cols), centre: [px[0], px[1], px[2]] };
	});
	let heat = await heatmap();
	check(heat.rows === 32 && heat.cols === 32 && heat.w >= 32, `the heatmap is drawn (${heat.rows}x${heat.cols} cells on ${heat.w}x${heat.h} px)`);
	check(heat.centre.join() === '255,0,255', `channel 0 is all NaN: its cells are in the NaN colour (${heat.centre})`);
	check((await webview.locator('#indices input').count()) === 2, 'a 4-D tensor: batch and channel pickers');
	check(Number(await webview.locator('#histogram').getAttribute('data-bins')) > 0, 'a histogram of the finite values');
	await shot('tensor-viewer-nan-channel');

	// Pick channel 1 (no NaN): a real heatmap.
	const channel = webview.locator('#indices input').nth(1);
	await channel.fill('1');
	await channel.press('Enter');
	await until_('the slice [0, 1]', async () => /\[0, 1, :, :\]/.test(await webview.locator('#subtitle').innerText()), 15000);
	heat = await until_('channel 1 drawn', async () => {
		const h = await heatmap();
		return h.centre.join() !== '255,0,255' ? h : undefined;
	}, 15000);
	check(true, `channel 1 picked: slice [0, 1, :, :] drawn on the colour scale (centre ${heat.centre})`);
	await shot('tensor-viewer-channel-1');

	// 6. Step again: the viewer asks again (it follows the session).
	const before = tensorViews();
	await stepOver.click();
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'gap' }).first().waitFor({ state: 'visible', timeout: 30000 });
	await until_('a tensorView request after the step', async () => tensorViews() > before, 15000);
	check(true, 'after a step the viewer asked the adapter again');
	await shot('viewer-after-step');
}

async function runFromExplorer(page, server, shot) {
	// 8. The explorer's context menu on the model: "Run ONNX Model" (noDebug) runs it through.
	const launches = () => readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch').length;
	const launchesBefore = launches();
	await page.keyboard.press('Control+Shift+E');
	const file = page.locator('.explorer-folders-view .monaco-list-row .label-name', { hasText: /^nan_demo\.onnx$/ }).first();
	await file.waitFor({ state: 'visible', timeout: 10000 });
	await file.click({ button: 'right' });
	const runItem = page.locator('.context-view .action-menu-item', { hasText: 'Run ONNX Model' }).first();
	await runItem.waitFor({ state: 'visible', timeout: 10000 });
	check(await page.locator('.context-view .action-menu-item', { hasText: 'Debug ONNX Model' }).first().isVisible(), 'the explorer context menu on a .onnx has "Debug ONNX Model" and "Run ONNX Model"');
	await shot('explorer-menu');
	await sleep(300);
	await runItem.hover();
	await runItem.click();
	await sleep(300);
	if (await runItem.isVisible()) await page.keyboard.press('Enter');
	await until_('the noDebug run to end', async () => {
		const { messages } = readDapLog(server.dirs.data);
		const launchesNow = messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch');
		const last = launchesNow[launchesNow.length - 1];
		if (launchesNow.length <= launchesBefore || !last.msg.arguments.noDebug) return false;
		const after = messages.slice(messages.indexOf(last));
		return after.some((m) => m.dir === '<--' && m.msg.event === 'terminated') ? after : false;
	}, 60000).then((after) => check(!after.some((m) => m.dir === '<--' && m.msg.event === 'stopped'), 'Run ONNX Model ran to the end without stopping, breakpoint and all'));
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

async function debugServerVariant(page, server, ws, shot) {
	// 9. "debugServer" in launch.json: VS Code connects to a running adapter (graph-dap adapter --port).
	const adapter = spawn(python, ['-m', 'graph_dap.adapter', '--port', '0'], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
	try {
		const port = await new Promise((resolve, reject) => {
			let out = '';
			adapter.stdout.on('data', (d) => {
				out += d;
				const m = /listening on [^:\s]+:(\d+)/.exec(out);
				if (m) resolve(Number(m[1]));
			});
			adapter.on('exit', (code) => reject(new Failure(`graph-dap adapter --port 0 exited (${code}) before listening`)));
			setTimeout(() => reject(new Failure('graph-dap adapter --port 0 printed no port in 30s')), 30000);
		});
		mkdirSync(join(ws, '.vscode'), { recursive: true });
		const config = { type: 'graph-dap', request: 'launch', name: 'ONNX over TCP', model: '${workspaceFolder}/nan_demo.onnx', stopOnEntry: true, debugServer: port };
		writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
		await sleep(1500);
		await page.locator('.editor-instance .view-lines').first().click();
		await page.keyboard.press('F5');
		await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
		await page.keyboard.press('Control+Shift+D');
		await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'stem/conv' }).first().waitFor({ state: 'visible', timeout: 60000 });
		const launch = readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch').pop();
		check(launch?.msg.arguments.debugServer === port, `debugServer ${port}: connected to the running adapter, stopped on entry at stem/conv`);
		await shot('debug-server');
		await page.locator('.debug-toolbar .codicon-debug-stop, .debug-toolbar .codicon-debug-disconnect').first().click();
		await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
	} finally {
		try {
			process.kill(-adapter.pid, 'SIGKILL');
		} catch {
			// gone already
		}
	}
}

function checkDapLog(server, ws) {
	const model = join(ws, 'nan_demo.onnx');
	const listing = join(ws, 'nan_demo.onnxtxt');
	const { files, messages } = readDapLog(server.dirs.data);
	if (!check(files.length > 0 && messages.length > 0, `the DAP log is on disk (${files.length} file, ${messages.length} messages)`)) return;
	// The F5 session's messages (the first session; later ones are the noDebug and TCP runs).
	const f5 = messages.find((m) => m.dir === '-->' && m.msg.command === 'launch')?.session;
	const requests = messages.filter((m) => m.session === f5 && m.dir === '-->' && m.msg.type === 'request').map((m) => m.msg);
	const fromAdapter = messages.filter((m) => m.session === f5 && m.dir === '<--').map((m) => m.msg);
	const response = (req) => fromAdapter.find((m) => m.type === 'response' && m.request_seq === req.seq);
	const launch = requests.find((r) => r.command === 'launch');
	check(launch && launch.arguments.model === model && launch.arguments.type === 'graph-dap', 'launch: the F5 configuration names the model (filled without a launch.json)');
	const setBps = requests.filter((r) => r.command === 'setBreakpoints' && r.arguments.source?.path === listing);
	const firstBp = setBps[0];
	const configDone = requests.find((r) => r.command === 'configurationDone');
	check(firstBp && firstBp.arguments.breakpoints?.length === 1 && (!configDone || firstBp.seq < configDone.seq), 'setBreakpoints on the listing file before configurationDone (set before the session)');
	const bpResp = firstBp && response(firstBp);
	check(bpResp?.success && bpResp.body.breakpoints[0].verified === true, `the adapter verified it (${JSON.stringify(bpResp?.body?.breakpoints?.[0])})`);
	const stopped = fromAdapter.filter((m) => m.type === 'event' && m.event === 'stopped');
	check(stopped[0]?.body?.reason === 'breakpoint', `the first stop is the breakpoint (${stopped[0]?.body?.reason})`);
	const st = requests.find((r) => r.command === 'stackTrace');
	const frame = st && response(st)?.body?.stackFrames?.[0];
	check(frame && frame.name.startsWith('norm/std') && frame.source?.path === listing, `the top frame is norm/std in the listing file (${frame?.name}, ${frame?.source?.path}:${frame?.line})`);
	check(frame && !(frame.source?.sourceReference > 0), `the frame's source is the file itself, no sourceReference (got ${frame?.source?.sourceReference})`);
	const tv = requests.filter((r) => r.command === 'graphDap/tensorView');
	const tvOk = tv.map(response).filter((r) => r?.success);
	check(tv.length >= 2 && tvOk.length >= 1, `graphDap/tensorView requests: ${tv.length}, successful: ${tvOk.length}`);
	const body = tvOk[0]?.body;
	if (body) {
		const cells = (body.data ?? []).reduce((a, r) => a + (Array.isArray(r) ? r.length : 1), 0);
		check(body.name === 'norm_out' && Array.isArray(body.shape) && Array.isArray(body.histogram?.counts), 'the tensorView body has name, shape and histogram');
		check(cells <= 256 * 256, `nothing large crossed the wire (${cells} cells)`);
	}
	check(fromAdapter.some((m) => m.type === 'event' && m.event === 'terminated'), 'the adapter sent terminated');
}

// --- main -------------------------------------------------------------------------------
async function main() {
	rmSync(artifacts, { recursive: true, force: true });
	mkdirSync(artifacts, { recursive: true });
	const tools = setup();
	const tmp = mkdtempSync(join(tmpdir(), 'graph-dap-e2e-'));
	const ws = join(tmp, 'workspace');
	mkdirSync(ws);
	copyFileSync(exampleModel, join(ws, 'nan_demo.onnx'));
	// A model whose work is inside a Loop's body (tests/cf_models.py), for the control-flow step.
	const made = spawnSync(python, ['-c', `import sys, onnx; sys.path.insert(0, ${JSON.stringify(join(repo, 'tests'))}); from cf_models import loop_model; onnx.save(loop_model(trip=5), ${JSON.stringify(join(ws, 'loop.onnx'))})`], { encoding: 'utf8' });
	if (made.status !== 0) fail(`cannot write the Loop model: ${made.stderr}`);
	// A model exported from PyTorch (tests/data/source) beside its Python source, for the source step.
	mkdirSync(join(ws, 'tiny'));
	for (const f of ['tiny_dynamo.onnx', 'tinymodel.py']) copyFileSync(join(repo, 'tests', 'data', 'source', f), join(ws, 'tiny', f));
	writeScanInputs(ws, join(tmp, 'gate'));
	// A program that runs the example model, for the mixed-mode step.
	writeFileSync(
		join(ws, 'infer.py'),
		'import sys\n\nimport numpy as np\nimport onnxruntime as ort\n\nsession = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])\n' +
			'image = np.full((1, 3, 32, 32), 0.5, np.float32)\n(probs,) = session.run(None, {"image": image})\nprint("probs", probs.shape, flush=True)\n',
	);
	let server;
	let context;
	try {
		server = await startCodeServer(tools, tmp, ws);
		const { chromium } = await import('playwright-core');
		const home = join(tmp, 'home');
		mkdirSync(home);
		context = await chromium.launchPersistentContext(join(tmp, 'chromium'), {
			executablePath: '/usr/bin/chromium',
			headless: true,
			viewport: { width: 1440, height: 900 },
			env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_CACHE_HOME: join(home, '.cache') },
			args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
		});
		const page = context.pages()[0] ?? (await context.newPage());
		page.setDefaultTimeout(30000);
		try {
			await scenario(page, ws, server);
		} catch (e) {
			await page.screenshot({ path: join(artifacts, 'failure.png') }).catch(() => undefined);
			throw e;
		}
		if (until === 'end') {
			await sleep(1500);
			checkDapLog(server, ws);
		}
	} catch (e) {
		if (!(e instanceof Failure)) console.error(e);
		check(false, e.message.split('\n')[0]);
	} finally {
		await context?.close().catch(() => undefined);
		await stopProcessGroup(server?.child);
		for (const f of server ? readDapLog(server.dirs.data).files : []) copyFileSync(f, join(artifacts, 'dap-traffic.log'));
		if (!opts.has('--keep')) rmSync(tmp, { recursive: true, force: true });
		else log(`kept ${tmp}`);
	}
	console.log(`e2e: ${checks.passed} passed, ${checks.failed} failed`);
	process.exit(checks.failed === 0 && checks.passed > 0 ? 0 : 1);
}

main();
