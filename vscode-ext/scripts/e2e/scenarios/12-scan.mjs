// "Scan Inputs..." on the model: a scan cancelled from its progress notification (its results so far
// kept), then one that ends: the tree of failing inputs, one debugged to its first bad node, the report
// drawn in a webview and in Chromium.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { artifacts, check, exampleInExplorer, explorerMenu, launches, python, readDapLog, run as runProcess, runCommand, sleep, until_ } from '../helpers.mjs';

export const name = 'scan';
/** A Failure is recorded and the run goes on. */
export const soft = 'failures';

/** Six images (two too flat: Sqrt(var - eps) is NaN there), and a generator that stalls on a FIFO nobody writes. */
export function prepare({ ws, tmp }) {
	const gate = join(tmp, 'gate');
	const code = [
		'import numpy as np, os, sys',
		'rng = np.random.default_rng(0)',
		"os.makedirs(sys.argv[1] + '/inputs', exist_ok=True)",
		'for i, s in enumerate([20, 20, 0.1, 20, 0.1, 20]):',
		"    np.savez(f'{sys.argv[1]}/inputs/image_{i}.npz', image=(rng.standard_normal((1, 3, 32, 32)) * s).astype(np.float32))",
	].join('\n');
	runProcess(python, ['-c', code, ws]);
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
	runProcess('mkfifo', [gate]);
}

async function scanCommand(page) {
	const item = await explorerMenu(page, exampleInExplorer(page), 'Scan Inputs...');
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

export async function run({ page, server, ws, shot }) {
	const out = join(ws, 'nan_demo-scan');
	// A scan that stalls (its generator waits on a FIFO): cancelled from its progress notification.
	await scanCommand(page);
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
	await scanCommand(page);
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
	const launchesBefore = launches(server).length;
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
	// Back to the listing, for the scenarios after this one.
	await runCommand(page, 'View: Close All Editors');
	await page.keyboard.press('Control+P');
	await page.locator('.quick-input-widget input').first().waitFor({ state: 'visible' });
	await page.keyboard.type('nan_demo.onnxtxt');
	await page.locator('.quick-input-list .monaco-list-row', { hasText: 'nan_demo.onnxtxt' }).first().waitFor({ state: 'visible', timeout: 10000 });
	await page.keyboard.press('Enter');
	await page.locator('.editor-instance .view-lines').first().waitFor({ state: 'visible', timeout: 30000 });
}

export async function recover({ page }) {
	await page.keyboard.press('Escape');
}
