#!/usr/bin/env node
// The graph view end to end in a real VS Code (code-server, headless Chromium), on the PaddleOCR-style
// detector of tests/ocr_models.py (its head makes a NaN): open the model and its graph view (the
// explorer's context menu), find a node with the view's search (the listing follows), set a breakpoint
// by clicking the node's left edge, F5 (launch.json: break on NaN): the node highlighted at the stop;
// continue: the NaN stop marks where it started, the next one colours the spread; the listing's cursor
// selects the node in the graph; a compare --json overlay from the explorer draws its legend. The view's
// state is read from its page (body data-* attributes the renderer sets as it draws), the highlight's
// latency from the extension's "graph-dap Graph" output. Screenshots go to e2e-artifacts/graph-*.png.
//
// Run by scripts/ci.sh after e2e.mjs, with the .vsix built. Its code-server helpers are copies of
// e2e.mjs's (that file is being split into scenarios and shared helpers: this one moves there then).
// Options: --no-setup (ignored: ci.sh sets up), --keep (keep the temp folder).

import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = join(here, '..');
const artifacts = join(here, 'e2e-artifacts');
const opts = new Set(process.argv.slice(2));
const python = spawnSync(process.env.GRAPH_DAP_PYTHON || 'python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout?.trim() || 'python3';
const t0 = Date.now();
const log = (...a) => console.log(`[e2e-graph ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`, ...a);
class Failure extends Error {}
const fail = (msg) => {
	throw new Failure(msg);
};
const checks = { passed: 0, failed: 0 };
function check(ok, what) {
	checks[ok ? 'passed' : 'failed']++;
	log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
	return ok;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, timeoutMs = 30000, everyMs = 200) {
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
function findFiles(dir, test, out = []) {
	if (!existsSync(dir)) return out;
	for (const name of readdirSync(dir)) {
		const p = join(dir, name);
		if (statSync(p).isDirectory()) findFiles(p, test, out);
		else if (test(p)) out.push(p);
	}
	return out;
}

// --- code-server (as e2e.mjs starts it) ---------------------------------------------------
function tools() {
	const cache = process.env.GRAPH_DAP_E2E_CACHE || join(process.env.HOME || tmpdir(), '.cache', 'graph-dap-e2e');
	const env = {};
	for (const line of readFileSync(join(cache, 'env.sh'), 'utf8').split('\n')) {
		const m = /^export (\w+)="(.*)"$/.exec(line);
		if (m) env[m[1]] = m[2];
	}
	const vsix = join(here, 'dist', 'graph-dap.vsix');
	if (!env.GRAPH_DAP_CODE_SERVER || !existsSync(vsix)) fail('code-server or dist/graph-dap.vsix missing: run scripts/ci.sh (setup-e2e.sh, npm run package)');
	return { codeServer: env.GRAPH_DAP_CODE_SERVER, nodeBin: env.GRAPH_DAP_NODE24_BIN, vsix };
}

async function startCodeServer(t, tmp, ws) {
	const dirs = { data: join(tmp, 'data'), ext: join(tmp, 'extensions'), xdg: join(tmp, 'xdg') };
	Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
	mkdirSync(join(dirs.data, 'User'), { recursive: true });
	const settings = {
		'workbench.startupEditor': 'none', 'workbench.secondarySideBar.defaultVisibility': 'hidden', 'chat.disableAIFeatures': true,
		'workbench.tips.enabled': false, 'telemetry.telemetryLevel': 'off', 'extensions.autoCheckUpdates': false, 'extensions.autoUpdate': false,
		'update.mode': 'none', 'security.workspace.trust.enabled': false, 'window.restoreWindows': 'none', 'workbench.enableExperiments': false,
		'debug.openDebug': 'openOnDebugBreak', 'graphDap.python': python, 'graphDap.warmStart': false, 'graphDap.languageServer': false,
		'[onnx-listing]': { 'editor.wordWrap': 'on' },
	};
	writeFileSync(join(dirs.data, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
	const port = await freePort();
	const cfg = join(tmp, 'code-server.yaml');
	writeFileSync(cfg, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
	const env = { ...process.env, PATH: `${t.nodeBin}:${process.env.PATH}`, XDG_CONFIG_HOME: join(dirs.xdg, 'config'), XDG_DATA_HOME: join(dirs.xdg, 'data'), XDG_CACHE_HOME: join(dirs.xdg, 'cache') };
	const common = ['--config', cfg, '--user-data-dir', dirs.data, '--extensions-dir', dirs.ext];
	const r = spawnSync(t.codeServer, [...common, '--install-extension', t.vsix], { env, stdio: ['ignore', 'ignore', 'inherit'] });
	if (r.status !== 0) fail('code-server --install-extension failed');
	const fd = openSync(join(artifacts, 'graph-code-server.log'), 'w');
	const child = spawn(t.codeServer, [...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--reconnection-grace-time', '5', ws], { env, detached: true, stdio: ['ignore', fd, fd] });
	const server = { child, port, dirs, exited: false };
	child.on('exit', () => (server.exited = true));
	await until('code-server /healthz', async () => {
		if (server.exited) fail('code-server exited; see e2e-artifacts/graph-code-server.log');
		return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok;
	}, 60000);
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
		// gone
	}
}

// --- the workspace ------------------------------------------------------------------------
function workspace(ws) {
	const make = `
import json, subprocess, sys
sys.path.insert(0, ${JSON.stringify(join(repo, 'tests'))})
import numpy as np, onnx
from ocr_models import ocr_det
onnx.save(ocr_det(32), "ocr.onnx")
other = ocr_det(32)
for t in other.graph.initializer:
    if t.name == "neck.smooth.weight":
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * np.float32(1.01), t.name))
onnx.save(other, "ocr_other.onnx")
out = subprocess.run([sys.executable, "-m", "graph_dap", "compare", "ocr.onnx", "--against-model", "ocr_other.onnx", "--json"], capture_output=True, text=True)
open("ocr-compare.json", "w").write(out.stdout)
json.loads(out.stdout)
`;
	const r = spawnSync(python, ['-c', make], { cwd: ws, encoding: 'utf8' });
	if (r.status !== 0) fail(`cannot write the workspace's models: ${r.stderr}`);
	mkdirSync(join(ws, '.vscode'));
	const config = { type: 'graph-dap', request: 'launch', name: 'OCR detector, break on NaN', model: '${workspaceFolder}/ocr.onnx', breakOn: ['nan'] };
	writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
}

// --- the scenario -------------------------------------------------------------------------
async function scenario(page, ws, server) {
	let n = 0;
	const shot = async (name) => {
		const file = join(artifacts, `graph-${String(++n).padStart(2, '0')}-${name}.png`);
		await page.screenshot({ path: file });
		log(`screenshot ${file}`);
	};
	const visible = (selector, options = {}) => page.locator(selector, options).first().waitFor({ state: 'visible', timeout: options.timeout ?? 30000 });
	log('workbench');
	await page.goto(`http://127.0.0.1:${server.port}/?folder=${encodeURIComponent(ws)}`);
	await visible('.monaco-workbench .explorer-folders-view', { timeout: 60000 });
	await sleep(1000);

	// The model: its listing opens; then its graph view, from the explorer's context menu.
	await page.keyboard.press('Control+P');
	await visible('.quick-input-widget input');
	await page.keyboard.type('ocr.onnx');
	await visible('.quick-input-list .monaco-list-row', { hasText: 'ocr.onnx' });
	await sleep(300);
	await page.keyboard.press('Enter');
	await visible('.tabs-container .tab.active', { hasText: 'ocr.onnxtxt', timeout: 60000 });
	const listingText = readFileSync(join(ws, 'ocr.onnxtxt'), 'utf8').split('\n');
	const lineOf = (id) => listingText.findIndex((l) => l.endsWith(`# ${id}`) || l.includes(`# ${id}  #`)) + 1;
	log('the listing is open');
	await explorerMenu(page, /^ocr\.onnx$/, 'Show Graph View');
	const view = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
	const body = view.locator('body');
	const data = () => body.evaluate((b) => ({ ...b.dataset }));
	await until('the graph drawn in the view', async () => (await data()).drawn === '1', 90000);
	const shown = await data();
	check(shown.nodes === '40', `the graph view draws the model's 40 nodes (${shown.nodes}), ${shown.shown} boxes (modules open: a small model)`);
	await shot('graph-view');

	// Search: the node is selected and brought into view; the listing follows.
	const bpNode = 'backbone/stage3/conv1/conv';
	await view.locator('#gv-search').fill('stage3/conv1/conv');
	await view.locator('#gv-results div').first().waitFor({ state: 'visible' });
	await view.locator('#gv-search').press('Enter');
	await until(`${bpNode} selected`, async () => (await data()).selected === bpNode);
	// The listing (the first editor group) focused, its cursor unmoved: the status bar shows where it is.
	const lnCol = async () => {
		await page.keyboard.press('Control+1');
		return (await page.locator('.statusbar-item[id="status.editor.selection"]').first().innerText({ timeout: 2000 })).trim();
	};
	await until('the listing at the selected node', async () => (await lnCol()).startsWith(`Ln ${lineOf(bpNode)},`), 10000);
	check(true, `search selected ${bpNode}; the listing's cursor went to its line ${lineOf(bpNode)}`);

	// A breakpoint by clicking the node's left edge.
	const canvas = view.locator('#gv-canvas');
	const box = await body.evaluate((_, id) => window.graphView.boxOf(id), bpNode);
	await canvas.click({ position: { x: box.x + 4, y: box.y + box.h / 2 } });
	await until('the breakpoint drawn', async () => (await data()).breakpoints === bpNode);
	await visible('.editor-instance .codicon-debug-breakpoint');
	check(true, `clicking ${bpNode}'s left edge set a breakpoint: drawn on the graph, and in the listing's gutter`);
	await shot('breakpoint-set');

	// F5: stopped at the breakpoint, the node highlighted.
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('F5');
	await visible('.debug-toolbar', { timeout: 60000 });
	await until('stopped at the breakpoint', async () => (await data()).current === bpNode, 60000);
	await visible('.editor-instance .debug-top-stack-frame-line');
	check((await data()).currentShown === bpNode, `at the stop the graph highlights ${bpNode} (current node, shown as itself)`);
	await shot('stopped-at-breakpoint');

	// Run to Here from a node's context menu (found with the search): stopped there.
	const runTo = 'neck/smooth/conv';
	await view.locator('#gv-search').fill(runTo);
	await view.locator('#gv-search').press('Enter');
	await until(`${runTo} selected`, async () => (await data()).selected === runTo);
	const target = await body.evaluate((_, id) => window.graphView.boxOf(id), runTo);
	await canvas.click({ button: 'right', position: { x: target.x + target.w / 2, y: target.y + target.h / 2 } });
	await view.locator('#gv-menu div', { hasText: 'Run to Here' }).click();
	await until('stopped at the node run to', async () => (await data()).current === runTo, 60000);
	check(true, `"Run to Here" on ${runTo}'s context menu: stopped there, highlighted`);
	await view.locator('#gv-search').fill('');

	// Continue: the NaN stop at head/binarize/sqrt, where it starts; continue again: it spread.
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('F5');
	const origin = 'head/binarize/sqrt';
	await until('the NaN stop', async () => (await data()).current === origin, 60000);
	await until('the origin marked', async () => (await data()).origin === origin, 20000);
	check(true, `the NaN stop at ${origin}: the graph marks it where the NaN starts`);
	await shot('nan-origin');
	// Each NaN stop after it: the node it spread to (the NaN filter stops at every node that makes one).
	for (const [next, count] of [['head/binarize/sigmoid', 1], ['head/step/sub', 2], ['head/step/mul', 3]]) {
		await page.keyboard.press('F5');
		await until(`the NaN stop at ${next}`, async () => (await data()).current === next, 60000);
		await until(`${count} node(s) coloured as the spread`, async () => Number((await data()).spread) === count, 20000);
	}
	const spread = await data();
	check(spread.origin === origin && /NaN\/Inf starts here \(1\)/.test(spread.legend) && /NaN\/Inf spread to \(3\)/.test(spread.legend),
		`the stops after it colour the spread (${spread.spread} nodes) and the legend says so (${spread.legend})`);
	// For the README: the graph and the listing without the side bar, the panel and the exception widget.
	await page.keyboard.press('Escape');
	for (const command of ['View: Close Primary Side Bar', 'View: Hide Panel']) await runCommand(page, command);
	await sleep(800);
	await shot('nan-spread');

	// The listing's cursor selects the node in the graph.
	const other = 'neck/lateral1/conv';
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await visible('.quick-input-widget input');
	await page.keyboard.type(String(lineOf(other)));
	await page.keyboard.press('Enter');
	await until(`${other} selected in the graph`, async () => (await data()).selected === other, 10000);
	check(true, `moving the listing's cursor to line ${lineOf(other)} selected ${other} in the graph`);
	await page.locator('.debug-toolbar .codicon-debug-stop').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });

	// A compare --json overlay, from the explorer: coloured, with its legend.
	await explorerMenu(page, /^ocr-compare\.json$/, 'Show on Graph View');
	const overlaid = await until('the compare overlay', async () => {
		const d = await data();
		return d.overlay?.startsWith('compare:') ? d : false;
	}, 60000);
	const legend = await view.locator('#gv-legend').innerText();
	check(/SQNR/.test(legend) && /best/.test(legend) && /worst/.test(legend) && /divergence/.test(legend), `the compare overlay draws its legend (${legend.replace(/\n/g, ' | ').slice(0, 160)})`);
	check(overlaid.overlay === 'compare:snr', `coloured by SQNR (${overlaid.overlay})`);
	await shot('compare-overlay');
}

async function runCommand(page, title) {
	await page.keyboard.press('Control+Shift+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(title);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ state: 'visible', timeout: 10000 });
	await sleep(200);
	await page.keyboard.press('Enter');
	await sleep(300);
}

async function explorerMenu(page, name, item) {
	await page.keyboard.press('Control+Shift+E');
	await sleep(800); // the explorer reveals the active editor's file first
	const entry = page.locator('.context-view .action-menu-item', { hasText: item }).first();
	for (let attempt = 0; ; attempt++) {
		const file = page.locator('.explorer-folders-view .monaco-list-row .label-name', { hasText: name }).first();
		await file.waitFor({ state: 'visible', timeout: 10000 });
		await file.click({ button: 'right' });
		const found = await entry.waitFor({ state: 'visible', timeout: 3000 }).then(() => true, () => false);
		if (found) break;
		await page.keyboard.press('Escape');
		if (attempt === 2) fail(`the explorer's context menu on ${name} has no "${item}"`);
		await sleep(500);
	}
	await sleep(200);
	await entry.hover();
	await entry.click();
	await sleep(300);
	if (await entry.isVisible()) await page.keyboard.press('Enter');
}

/** The highlight latencies the extension logged ("graph-dap Graph" output). */
function latencies(dataDir) {
	const out = [];
	for (const f of findFiles(join(dataDir, 'logs'), (p) => /output_logging_/.test(p) && /graph-dap Graph/.test(p))) {
		copyFileSync(f, join(artifacts, 'graph-view.log'));
		for (const m of readFileSync(f, 'utf8').matchAll(/stop (\d+): highlighted ([\d.]+) ms after the stopped event/g)) out.push(Number(m[2]));
	}
	return out;
}

async function main() {
	mkdirSync(artifacts, { recursive: true });
	const tmp = mkdtempSync(join(tmpdir(), 'graph-dap-e2e-graph-'));
	const ws = join(tmp, 'workspace');
	mkdirSync(ws);
	let server;
	let context;
	try {
		const t = tools();
		workspace(ws);
		server = await startCodeServer(t, tmp, ws);
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
			await page.screenshot({ path: join(artifacts, 'graph-failure.png') }).catch(() => undefined);
			throw e;
		}
		await sleep(1200);
		const ms = latencies(server.dirs.data);
		check(ms.length >= 6, `the extension logged each stop's highlight: ${ms.map((x) => x.toFixed(0)).join(', ')} ms after the stopped event`);
	} catch (e) {
		if (!(e instanceof Failure)) console.error(e);
		check(false, e.message.split('\n')[0]);
	} finally {
		await context?.close().catch(() => undefined);
		await stopProcessGroup(server?.child);
		if (!opts.has('--keep')) rmSync(tmp, { recursive: true, force: true });
		else log(`kept ${tmp}`);
	}
	console.log(`e2e-graph: ${checks.passed} passed, ${checks.failed} failed`);
	process.exit(checks.failed === 0 && checks.passed > 0 ? 0 : 1);
}

main();
