// The tensor viewer, from the Variables view's context menu on norm_out (it holds NaN): its statistics,
// the heatmap, another channel picked; after a step it asks the adapter again (it follows the session).

import { check, choose, expandScopes, fail, log, readDapLog, stepOver, until_ } from '../helpers.mjs';

export const name = 'viewer';
/** A Failure is recorded and the run goes on, so that the steps after it are tried. */
export const soft = 'failures';

export async function run({ page, server, shot }) {
	const tensorViews = () => readDapLog(server.dirs.data).messages.filter((m) => m.dir === '-->' && m.msg.command === 'graphDap/tensorView').length;
	// Step to pool: "Last outputs" is then norm_out, float32[1,8,32,32], NaN in 5 of its 8 channels.
	await stepOver(page).click();
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'pool' }).first().waitFor({ state: 'visible', timeout: 30000 });
	const row = await until_('norm_out in Variables', async () => {
		await expandScopes(page);
		const r = page.locator('.debug-variables .monaco-list-row', { hasText: /^norm_out/ }).first();
		return (await r.count()) ? r : undefined;
	});
	// The bottom panel off, so that the viewer has room.
	if (await page.locator('.part.panel').isVisible()) await page.keyboard.press('Control+J');
	await row.click({ button: 'right' });
	const item = page.locator('.context-view .action-menu-item', { hasText: 'View Tensor' }).first();
	await item.waitFor({ state: 'visible', timeout: 10000 });
	check(true, 'the Variables context menu has "View Tensor" on a tensor');
	await choose(page, item);
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

	// Step again: the viewer asks again (it follows the session).
	const before = tensorViews();
	await stepOver(page).click();
	await page.locator('.debug-call-stack .monaco-list-row', { hasText: 'gap' }).first().waitFor({ state: 'visible', timeout: 30000 });
	await until_('a tensorView request after the step', async () => tensorViews() > before, 15000);
	check(true, 'after a step the viewer asked the adapter again');
	await shot('viewer-after-step');
}
