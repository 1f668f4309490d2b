// While stopped, the language server's hover on a computed value has its live summary (the server asks
// the extension, which asks the adapter's graphDap/summaries).

import { check, fail, gotoSpot, hoverText, spotOf, until_ } from '../helpers.mjs';

export const name = 'live-hover';
/** A Failure is recorded and the run goes on. */
export const soft = 'failures';

export async function run({ page, listingText, shot }) {
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

export async function recover({ page }) {
	await page.keyboard.press('Escape');
}
