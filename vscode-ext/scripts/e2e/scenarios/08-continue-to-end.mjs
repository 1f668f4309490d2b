// Continue to the end (a NaN/Inf stop on the way is continued too); no launch.json was written.

import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { check, continueToEnd, sleep } from '../helpers.mjs';

export const name = 'continue-to-end';

export async function run({ page, ws, shot }) {
	await continueToEnd(page);
	check(true, 'continued to the end: the session is over');
	check(!existsSync(join(ws, '.vscode', 'launch.json')), 'no launch.json was written');
	await sleep(500);
	await shot('ended');
}
