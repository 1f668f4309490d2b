// F5 without a launch.json: no question which debugger, paused at the breakpoint, a tensor with its
// shape and statistics in Variables.

import { check, expandScopes, until_ } from '../helpers.mjs';

export const name = 'paused';

export async function run({ page, visible, text, shot }) {
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
	await until_('a tensor with its shape and statistics in Variables', async () => {
		await expandScopes(page);
		return /float32\[[\d,\s]+\].*min=.*max=/.test(await text('.debug-variables .monaco-list-row'));
	});
	check(true, 'Variables show a tensor with its shape and statistics');
	await shot('paused-at-breakpoint');
}
