// A gutter breakpoint on the Sqrt node (norm/std), before any session; then an interpreter without
// graph_dap: F5 says so, and how to install it, and starts no session.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { check, fail, sleep } from '../helpers.mjs';

export const name = 'breakpoint';

export async function run({ page, server, listingText, visible, shot }) {
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

	// An interpreter without graph_dap: F5 says so, and how to install it.
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
}
