// The listing's language server: the Sqrt(Sub(...)) warning in Problems, a hover with the value's shape,
// F12 to its producer, the outline.

import { check, gotoSpot, hoverText, spotOf, until_ } from '../helpers.mjs';

export const name = 'language-server';
/** Any error is recorded and the run goes on. */
export const soft = 'errors';

export async function run({ page, listingText, shot }) {
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

export async function recover({ page }) {
	await page.keyboard.press('Escape');
}
