// The next session's adapter is started ahead; a breakpoint on a line inside a Loop's body, F5: the call
// stack has two levels, and the session took the adapter started ahead.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { callStackRow, check, fail, goTo, openFile, python, repo, sleep, stdioAdapters, stopSession, until_ } from '../helpers.mjs';

export const name = 'control-flow';
/** A Failure is recorded and the run goes on. */
export const soft = 'failures';

/** A model whose work is inside a Loop's body (tests/cf_models.py). */
export function prepare({ ws }) {
	const code = `import sys, onnx; sys.path.insert(0, ${JSON.stringify(join(repo, 'tests'))}); from cf_models import loop_model; onnx.save(loop_model(trip=5), ${JSON.stringify(join(ws, 'loop.onnx'))})`;
	const made = spawnSync(python, ['-c', code], { encoding: 'utf8' });
	if (made.status !== 0) fail(`cannot write the Loop model: ${made.stderr}`);
}

export async function run({ page, ws, server, shot }) {
	// The sessions before this one ended: the extension has started the next session's adapter ahead.
	// (The same one twice, 1.5 s apart: the last session's own adapter may still be on its way out.)
	let waiting = [];
	await until_('an adapter started ahead for the next session', async () => {
		const first = stdioAdapters(server);
		await sleep(1500);
		waiting = stdioAdapters(server);
		return first.length === 1 && waiting.length === 1 && first[0] === waiting[0];
	}, 30000);
	await openFile(page, 'loop.onnx', 'loop.onnxtxt');
	const lines = readFileSync(join(ws, 'loop.onnxtxt'), 'utf8').split('\n');
	const line = lines.findIndex((l) => /#\s*tanh$/.test(l.trimEnd())) + 1;
	if (line < 1) fail('no line for the inner node tanh in the listing of loop.onnx');
	await goTo(page, line);
	await page.keyboard.press('F9');
	await sleep(500);
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await callStackRow(page, 'tanh (Tanh)').waitFor({ state: 'visible', timeout: 60000 });
	await callStackRow(page, 'loop (Loop) body, iteration 0').waitFor({ state: 'visible', timeout: 30000 });
	const rows = await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts();
	check(rows.some((r) => r.includes('tanh (Tanh)')) && rows.some((r) => r.includes('loop (Loop) body, iteration 0')), `a breakpoint inside a Loop's body: the call stack shows two levels (${rows.filter((r) => r.includes('(')).length} frames)`);
	await shot('control-flow-two-levels');
	const serving = stdioAdapters(server);
	check(serving.length === 1 && serving[0] === waiting[0], `the session took the adapter started ahead (pid ${waiting[0]}; adapters now: ${serving.join(', ') || 'none'})`);
	await stopSession(page);
}
