// What the end-to-end scenarios share: the paths and the interpreter, the checks and the log, waiting,
// the DAP traffic the extension logged, and the workbench gestures more than one scenario makes
// (open a file, go to a line, run a command, stop a session...). See ../e2e.mjs for how they run.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The extension's folder (vscode-ext), the repository, and where screenshots and logs go. */
export const here = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const repo = join(here, '..');
export const artifacts = join(here, 'e2e-artifacts');
// The interpreter by its absolute path (code-server's PATH may differ).
export const python = spawnSync(process.env.GRAPH_DAP_PYTHON || 'python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout?.trim() || 'python3';
export const exampleModel = join(repo, 'examples', 'nan_demo.onnx');

// --- checks and the log -------------------------------------------------------------------
const t0 = Date.now();
export const log = (...a) => console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`, ...a);
/** A step that cannot go on: a soft scenario records it and the run goes on, any other ends the run. */
export class Failure extends Error {}
export const fail = (msg) => {
	throw new Failure(msg);
};
export const checks = { passed: 0, failed: 0 };
export function check(ok, what) {
	if (ok) {
		checks.passed++;
		log(`ok   ${what}`);
	} else {
		checks.failed++;
		log(`FAIL ${what}`);
	}
	return ok;
}

// --- processes and waiting ----------------------------------------------------------------
export function run(cmd, args, options = {}) {
	const r = spawnSync(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...options });
	if (r.status !== 0) {
		fail(`${cmd} ${args.join(' ')} failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ''})`);
	}
	return r.stdout;
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** `fn()`'s first truthy answer, asked every `everyMs` (its errors count as "not yet"); a Failure after `timeoutMs`. */
export async function until_(what, fn, timeoutMs = 30000, everyMs = 250) {
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
export function freePort() {
	return new Promise((resolve, reject) => {
		const s = createServer();
		s.once('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

/** The pids of the graph-dap adapters on stdio under code-server (not pytest's, which may run beside this test). */
export function stdioAdapters(server) {
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

// --- the DAP log --------------------------------------------------------------------------
export function findFiles(dir, test, out = []) {
	if (!existsSync(dir)) return out;
	for (const name of readdirSync(dir)) {
		const p = join(dir, name);
		if (statSync(p).isDirectory()) findFiles(p, test, out);
		else if (test(p)) out.push(p);
	}
	return out;
}

/** The DAP messages the extension's tracker logged (its output channel, on disk): `{session, dir: '-->' | '<--', msg}`. */
export function readDapLog(dataDir) {
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

/** The `launch` requests VS Code has sent so far. */
export const launches = (server) => readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch');

// --- the workbench ------------------------------------------------------------------------
/** Quick Open (Ctrl+P) on `name`, then wait for its editor tab (`tab`) to be the active one. */
export async function openFile(page, name, tab = name, timeout = 60000) {
	await page.keyboard.press('Control+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(name);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first().waitFor({ state: 'visible' });
	await sleep(300);
	await page.keyboard.press('Enter');
	await page.locator('.tabs-container .tab.active', { hasText: tab }).first().waitFor({ state: 'visible', timeout });
}

/** Go to `where` (a line, or `line:column`) in the active editor (Ctrl+G). */
export async function goTo(page, where) {
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(String(where));
	await page.keyboard.press('Enter');
	await sleep(300);
}

/** A command by its title, from the command palette. */
export async function runCommand(page, title) {
	await page.keyboard.press('Control+Shift+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type(title);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ state: 'visible', timeout: 10000 });
	await sleep(200);
	await page.keyboard.press('Enter');
	await sleep(500);
}

/** A row of the Call Stack view that holds `text`. */
export const callStackRow = (page, text) => page.locator('.debug-call-stack .monaco-list-row', { hasText: text }).first();

/** Stop (or disconnect from) the session, and wait for its toolbar to go. */
export async function stopSession(page) {
	await page.locator('.debug-toolbar .codicon-debug-stop, .debug-toolbar .codicon-debug-disconnect').first().click();
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

/** Continue until the session ends (a NaN/Inf stop on the way is continued too). */
export async function continueToEnd(page) {
	for (let i = 0; i < 10 && (await page.locator('.debug-toolbar').isVisible()); i++) {
		const cont = page.locator('.debug-toolbar .codicon-debug-continue').first();
		if (await cont.isVisible()) await cont.click().catch(() => undefined);
		await sleep(1500);
	}
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}

/** The debug toolbar's Step Over button. */
export const stepOver = (page) => page.locator('.debug-toolbar .codicon-debug-step-over').first();

/** Open the collapsed "Inputs" and "Last outputs" scopes of the Variables view. */
export async function expandScopes(page) {
	for (const row of await page.locator('.debug-variables .monaco-list-row[aria-expanded="false"]').all()) {
		const label = await row.innerText({ timeout: 1000 }).catch(() => '');
		if (/^(Inputs|Last outputs)/.test(label)) await row.click({ timeout: 1000 }).catch(() => undefined);
	}
}

/** Line (1-based) and column (1-based, inside the name) of `name` on the line of node `node`. */
export function spotOf(listingText, node, name) {
	const lines = listingText.split('\n');
	const k = lines.findIndex((l) => l.endsWith(`# ${node}`));
	if (k < 0) fail(`no line for node ${node} in the listing`);
	const col = lines[k].indexOf(`(${name}`) + 2;
	if (col < 2) fail(`no ${name} on the line of ${node}`);
	return { line: k + 1, col: col + 2 };
}

export async function gotoSpot(page, spot) {
	await goTo(page, `${spot.line}:${spot.col}`);
}

/** The editor's hover at the cursor (editor.action.showHover), as text. */
export async function hoverText(page, widget = '.monaco-hover:not(.hidden)') {
	await page.keyboard.press('Control+K');
	await page.keyboard.press('Control+I');
	const hover = page.locator(widget).first();
	await hover.waitFor({ state: 'visible', timeout: 10000 });
	return hover.innerText(); // every part: the diagnostic's and the language server's
}

/** The explorer's context menu on `file` (a locator), and its item `title` clicked. */
export async function explorerMenu(page, file, title) {
	await page.keyboard.press('Control+Shift+E');
	await file.waitFor({ state: 'visible', timeout: 10000 });
	await file.click({ button: 'right' });
	const item = page.locator('.context-view .action-menu-item', { hasText: title }).first();
	await item.waitFor({ state: 'visible', timeout: 10000 });
	return item;
}

/** Click a context-menu item (hovered first; Enter when the click did not take). */
export async function choose(page, item) {
	await sleep(300);
	await item.hover();
	await item.click();
	await sleep(300);
	if (await item.isVisible()) await page.keyboard.press('Enter');
}

/** The explorer row of the example model. */
export const exampleInExplorer = (page) => page.locator('.explorer-folders-view .monaco-list-row .label-name', { hasText: /^nan_demo\.onnx$/ }).first();
