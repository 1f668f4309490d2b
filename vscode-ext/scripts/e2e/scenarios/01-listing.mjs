// Open the example model: its listing shows beside it, read-only, coloured, as `graph-dap listing` prints it.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { check, python, sleep } from '../helpers.mjs';

export const name = 'listing';

export async function run(ctx) {
	const { page, ws, visible, text, shot } = ctx;
	const model = join(ws, 'nan_demo.onnx');
	const listing = join(ws, 'nan_demo.onnxtxt');
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
	ctx.listingText = listingText;
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
}
