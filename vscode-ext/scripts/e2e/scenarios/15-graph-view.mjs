// The graph view on the PaddleOCR-style detector of tests/ocr_models.py (its head makes a NaN): the view
// from the explorer's context menu, a node found with its search (the listing follows), breakpoints set
// (and cleared) by clicking nodes' left edges, F5 (a launch.json that breaks on NaN): the node highlighted
// at the stop; Run to Here and Jump to Here from nodes' context menus; the NaN stop marks where it
// started, the breakpoint after it shows where it spread; hover summaries; a click on a value opens the
// tensor viewer; the listing's cursor selects the node in the graph; a compare --json overlay from the
// explorer draws its legend. The view's state is read from its page (body data-* attributes
// the renderer sets as it draws), each stop's highlight latency from the extension's "graph-dap Graph"
// output (copied to e2e-artifacts/graph-view.log).

import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { artifacts, callStackRow, check, choose, explorerMenu, fail, findFiles, python, repo, runCommand, sleep, stopSession, until_ } from '../helpers.mjs';

export const name = 'graph-view';
export const soft = 'errors';

export function prepare({ ws }) {
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
	if (r.status !== 0) fail(`cannot write the graph view's models: ${r.stderr}`);
}

export async function recover({ page }) {
	await page.keyboard.press('Escape');
	if (await page.locator('.debug-toolbar').isVisible()) await stopSession(page).catch(() => undefined);
}

export async function run({ page, ws, server, shot, visible }) {
	const config = { type: 'graph-dap', request: 'launch', name: 'OCR detector, break on NaN', model: '${workspaceFolder}/ocr.onnx', breakOn: ['nan'] };
	mkdirSync(join(ws, '.vscode'), { recursive: true });
	writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
	// Earlier scenarios' webviews (the tensor viewer, the scan report) closed: the graph's is the only one.
	await runCommand(page, 'View: Close All Editors');
	await sleep(500);
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
	// The explorer shows the listing's file too before its rows are clicked (a row appearing moves those below it).
	await page.keyboard.press('Control+Shift+E');
	await inExplorer(page, /^ocr\.onnxtxt$/).waitFor({ state: 'visible', timeout: 10000 });
	await sleep(500);
	await choose(page, await explorerMenu(page, inExplorer(page, /^ocr\.onnx$/), 'Show Graph View'));
	const view = page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame');
	const body = view.locator('body');
	const data = () => body.evaluate((b) => ({ ...b.dataset }));
	await until_('the graph drawn in the view', async () => (await data()).drawn === '1', 90000);
	const shown = await data();
	check(shown.nodes === '40', `the graph view draws the model's 40 nodes (${shown.nodes}), ${shown.shown} boxes (modules open: a small model)`);
	await shot('graph-view');

	// Search: the node is selected and brought into view; the listing follows.
	const bpNode = 'backbone/stage3/conv1/conv';
	await view.locator('#gv-search').fill('stage3/conv1/conv');
	await view.locator('#gv-results div').first().waitFor({ state: 'visible' });
	await view.locator('#gv-search').press('Enter');
	await until_(`${bpNode} selected`, async () => (await data()).selected === bpNode);
	// The listing (the first editor group) focused, its cursor unmoved: the status bar shows where it is.
	const lnCol = async () => {
		await page.keyboard.press('Control+1');
		return (await page.locator('.statusbar-item[id="status.editor.selection"]').first().innerText({ timeout: 2000 })).trim();
	};
	await until_('the listing at the selected node', async () => (await lnCol()).startsWith(`Ln ${lineOf(bpNode)},`), 10000);
	check(true, `search selected ${bpNode}; the listing's cursor went to its line ${lineOf(bpNode)}`);

	// A breakpoint by clicking the node's left edge.
	const canvas = view.locator('#gv-canvas');
	const box = await body.evaluate((_, id) => window.graphView.boxOf(id), bpNode);
	await canvas.click({ position: { x: box.x + 4, y: box.y + box.h / 2 } });
	await until_('the breakpoint drawn', async () => (await data()).breakpoints === bpNode);
	await visible('.editor-instance .codicon-debug-breakpoint');
	check(true, `clicking ${bpNode}'s left edge set a breakpoint: drawn on the graph, and in the listing's gutter`);
	// A second one, after the NaN: at the last node of the head (a click sets it, a second click clears it, a third sets it).
	const lastNode = 'head/upsample/resize';
	const bpAt = async (id) => {
		await view.locator('#gv-search').fill(id);
		await view.locator('#gv-search').press('Enter');
		await until_(`${id} selected`, async () => (await data()).selected === id);
		const b = await body.evaluate((_, n) => window.graphView.boxOf(n), id);
		await canvas.click({ position: { x: b.x + 4, y: b.y + b.h / 2 } });
	};
	for (const [k, want] of [[1, `${bpNode},${lastNode}`], [2, bpNode], [3, `${bpNode},${lastNode}`]]) {
		await bpAt(lastNode);
		await until_(`click ${k} on ${lastNode}'s edge`, async () => (await data()).breakpoints.split(',').sort().join(',') === want.split(',').sort().join(','));
	}
	check(true, `clicks on ${lastNode}'s left edge set, cleared and set its breakpoint again`);
	await view.locator('#gv-search').fill('');
	await shot('breakpoint-set');

	// F5: stopped at the breakpoint, the node highlighted.
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('F5');
	await visible('.debug-toolbar', { timeout: 60000 });
	await until_('stopped at the breakpoint', async () => (await data()).current === bpNode, 60000);
	await visible('.editor-instance .debug-top-stack-frame-line');
	check((await data()).currentShown === bpNode, `at the stop the graph highlights ${bpNode} (current node, shown as itself)`);
	await shot('stopped-at-breakpoint');

	// Run to Here from a node's context menu (found with the search): stopped there.
	const runTo = 'neck/smooth/conv';
	await view.locator('#gv-search').fill(runTo);
	await view.locator('#gv-search').press('Enter');
	await until_(`${runTo} selected`, async () => (await data()).selected === runTo);
	const target = await body.evaluate((_, id) => window.graphView.boxOf(id), runTo);
	await canvas.click({ button: 'right', position: { x: target.x + target.w / 2, y: target.y + target.h / 2 } });
	await view.locator('#gv-menu div', { hasText: 'Run to Here' }).click();
	await until_('stopped at the node run to', async () => (await data()).current === runTo, 60000);
	await callStackRow(page, runTo).waitFor({ state: 'visible', timeout: 30000 });
	check(true, `"Run to Here" on ${runTo}'s context menu: stopped there, highlighted`);
	// Jump to Here, back to the breakpoint's node (gotoTargets and goto on its listing line).
	await view.locator('#gv-search').fill(bpNode);
	await view.locator('#gv-search').press('Enter');
	await until_(`${bpNode} selected`, async () => (await data()).selected === bpNode);
	const back = await body.evaluate((_, id) => window.graphView.boxOf(id), bpNode);
	await canvas.click({ button: 'right', position: { x: back.x + back.w / 2, y: back.y + back.h / 2 } });
	await view.locator('#gv-menu div', { hasText: 'Jump to Here' }).click();
	await until_('the jump back', async () => (await data()).current === bpNode, 60000);
	await callStackRow(page, bpNode).waitFor({ state: 'visible', timeout: 30000 });
	check(true, `"Jump to Here" on ${bpNode}: the program counter went back there, highlighted`);
	await view.locator('#gv-search').fill('');

	// Continue: the NaN stop at head/binarize/sqrt, where it starts; continue again: the breakpoint after it, where
	// the nodes it spread to are coloured (the launch's faultStops "new": no stop where a NaN is only carried on).
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('F5');
	const origin = 'head/binarize/sqrt';
	await until_('the NaN stop', async () => (await data()).current === origin, 60000);
	await until_('the origin marked', async () => (await data()).origin === origin, 20000);
	await callStackRow(page, origin).waitFor({ state: 'visible', timeout: 30000 });
	check(true, `the NaN stop at ${origin}: the graph marks it where the NaN starts`);
	await shot('nan-origin');
	await page.keyboard.press('F5');
	await until_(`the breakpoint at ${lastNode}`, async () => (await data()).current === lastNode, 60000);
	await callStackRow(page, lastNode).waitFor({ state: 'visible', timeout: 30000 });
	const spread = await until_('the spread coloured', async () => {
		const d = await data();
		return Number(d.spread) === 4 ? d : false;
	}, 20000);
	check(spread.origin === origin && /NaN\/Inf starts here \(1\)/.test(spread.legend) && /NaN\/Inf spread to \(4\)/.test(spread.legend),
		`at the breakpoint after it, the 4 nodes it spread to are coloured and the legend says so (${spread.legend})`);
	// Hovering a node while stopped shows its outputs' summaries (the adapter's graphDap/summaries).
	const mul = await body.evaluate(() => window.graphView.boxOf('head/step/mul'));
	await canvas.hover({ position: { x: mul.x + mul.w / 2, y: mul.y + mul.h / 2 } });
	const tip = await until_('the hover with the summary', async () => {
		const t = await view.locator('#gv-tooltip').innerText();
		return /head\.scaled: float32\[1,1,16,16\].*nan=\d+/.test(t) ? t : false;
	}, 10000);
	check(true, `hovering head/step/mul shows its line and its output's summary (${tip.split('\n').pop()})`);
	// A click on a value (the edge from the NaN's origin) opens it in the tensor viewer.
	const edge = await body.evaluate(() => window.graphView.edgeMid('head/binarize/sqrt', 'head/binarize/sigmoid'));
	await canvas.click({ position: edge });
	await visible('.tabs-container .tab', { hasText: 'Tensor: head.binarize.sqrt', timeout: 30000 });
	check(true, 'a click on the value head.binarize.sqrt (an edge) opened it in the tensor viewer');
	const tensorTab = page.locator('.tabs-container .tab', { hasText: 'Tensor: head.binarize.sqrt' }).first();
	await tensorTab.click({ button: 'middle' }); // closes that tab (the palette's "Close Editor" may pick "Close All Editors")
	await tensorTab.waitFor({ state: 'hidden', timeout: 10000 });

	// For the README: the graph and the listing without the side bar and the panel, the graph dragged down a
	// little so that the origin shows above the current node.
	await page.keyboard.press('Escape');
	// each only when its part shows (the palette does not offer it otherwise: a 10 s wait for nothing)
	for (const [part, command] of [['.part.sidebar', 'View: Close Primary Side Bar'], ['.part.panel', 'View: Hide Panel']]) {
		if (await page.locator(part).first().isVisible()) await runCommand(page, command).catch(() => page.keyboard.press('Escape'));
	}
	await sleep(500);
	const from = await body.evaluate(() => window.graphView.boxOf('head/upsample/resize'));
	await canvas.dragTo(canvas, { sourcePosition: { x: from.x - 60, y: from.y }, targetPosition: { x: from.x - 60, y: from.y + 200 } });
	await sleep(500);
	await shot('nan-spread');

	// The listing's cursor selects the node in the graph.
	const other = 'neck/lateral1/conv';
	await page.locator('.editor-instance .view-lines').first().click();
	await page.keyboard.press('Control+G');
	await visible('.quick-input-widget input');
	await page.keyboard.type(String(lineOf(other)));
	await page.keyboard.press('Enter');
	await until_(`${other} selected in the graph`, async () => (await data()).selected === other, 10000);
	check(true, `moving the listing's cursor to line ${lineOf(other)} selected ${other} in the graph`);
	await stopSession(page);

	// A compare --json overlay, from the explorer: coloured, with its legend.
	await choose(page, await explorerMenu(page, inExplorer(page, /^ocr-compare\.json$/), 'Show on Graph View'));
	const overlaid = await until_('the compare overlay', async () => {
		const d = await data();
		return d.overlay?.startsWith('compare:') ? d : false;
	}, 60000);
	const legend = await view.locator('#gv-legend').innerText();
	check(/SQNR/.test(legend) && /best/.test(legend) && /worst/.test(legend) && /divergence/.test(legend), `the compare overlay draws its legend (${legend.replace(/\n/g, ' | ').slice(0, 160)})`);
	check(overlaid.overlay === 'compare:snr', `coloured by SQNR (${overlaid.overlay})`);
	await shot('compare-overlay');

	await sleep(1200);
	const ms = latencies(server.dirs.data);
	check(ms.length >= 5, `the extension logged each stop's highlight: ${ms.map((x) => x.toFixed(0)).join(', ')} ms after the stopped event`);
}

/** The highlight latencies the extension logged ("graph-dap Graph" output), the log copied to the artifacts. */
function latencies(dataDir) {
	const out = [];
	for (const f of findFiles(join(dataDir, 'logs'), (p) => /output_logging_/.test(p) && /graph-dap Graph/.test(p))) {
		copyFileSync(f, join(artifacts, 'graph-view.log'));
		for (const m of readFileSync(f, 'utf8').matchAll(/stop (\d+): highlighted ([\d.]+) ms after the stopped event/g)) out.push(Number(m[2]));
	}
	return out;
}

/** The explorer row of a file of the workspace, by name. */
const inExplorer = (page, name) => page.locator('.explorer-folders-view .monaco-list-row .label-name', { hasText: name }).first();
