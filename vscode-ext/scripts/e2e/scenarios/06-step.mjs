// Step once: the call stack follows.

import { check, stepOver } from '../helpers.mjs';

export const name = 'step';

export async function run({ page, visible, shot }) {
	await stepOver(page).click();
	await visible('.debug-call-stack .monaco-list-row', { hasText: 'norm/scale', timeout: 30000 });
	check(true, 'a step: the call stack shows norm/scale');
	await shot('after-step');
}
