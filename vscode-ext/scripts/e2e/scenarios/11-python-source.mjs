// A model exported from PyTorch: a breakpoint on a line of its Python source, F5 on the model: it stops
// there, the editor shows tinymodel.py at that line, the call stack has the Python frames under the node.

import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { callStackRow, check, goTo, openFile, repo, stopSession, until_ } from '../helpers.mjs';

export const name = 'source';
/** Any error is recorded (the session stopped) and the run goes on. */
export const soft = 'errors';

/** The model (tests/data/source) beside its Python source. */
export function prepare({ ws }) {
	mkdirSync(join(ws, 'tiny'));
	for (const f of ['tiny_dynamo.onnx', 'tinymodel.py']) copyFileSync(join(repo, 'tests', 'data', 'source', f), join(ws, 'tiny', f));
}

export async function run({ page, ws, shot }) {
	const source = readFileSync(join(ws, 'tiny', 'tinymodel.py'), 'utf8').split('\n');
	const line = source.findIndex((l) => l.includes('F.softmax(')) + 1;
	await openFile(page, 'tinymodel.py');
	await goTo(page, line);
	await page.keyboard.press('F9');
	await page.locator('.editor-instance .codicon-debug-breakpoint').first().waitFor({ state: 'visible' });
	await openFile(page, 'tiny_dynamo.onnx', 'tiny_dynamo.onnxtxt');
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await callStackRow(page, 'node_softmax (Softmax)').waitFor({ state: 'visible', timeout: 60000 });
	await callStackRow(page, 'TinyModel.forward').waitFor({ state: 'visible', timeout: 30000 });
	const rows = (await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts()).map((r) => r.replace(/\s+/g, ' ').trim());
	const at = (text) => rows.findIndex((r) => r.includes(text));
	check(at('node_softmax') >= 0 && at('node_softmax') < at('Attention.forward') && at('Attention.forward') < at('Block.forward') && at('Block.forward') < at('TinyModel.forward'),
		`a breakpoint on tinymodel.py:${line}: the call stack has the node, then the Python frames (${rows.filter((r) => /forward|Softmax/.test(r)).join(' | ')})`);
	await page.locator('.tabs-container .tab.active', { hasText: 'tinymodel.py' }).first().waitFor({ state: 'visible', timeout: 30000 });
	await until_(`the cursor on line ${line} of tinymodel.py`, async () => new RegExp(`Ln ${line},`).test(await page.locator('.statusbar-item[id="status.editor.selection"]').innerText()), 10000);
	await page.locator('.editor-instance .debug-top-stack-frame-line').first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, `paused: the editor shows tinymodel.py at line ${line}, the top frame's line marked`);
	await page.locator('.debug-variables .monaco-list-row', { hasText: 'Module' }).first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, 'the Python frame has a "Module" scope in Variables');
	await shot('python-source-breakpoint');
	await stopSession(page);
}

export async function recover({ page }) {
	await page.locator('.debug-toolbar .codicon-debug-stop').first().click({ timeout: 5000 }).catch(() => undefined);
}
