// A Python program that runs the model, launched with "program": a Python breakpoint in the editor stops
// the program (debugpy); then the graph stops in its run call (stopOnSessionRun), both threads in the call stack.

import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { callStackRow, check, goTo, openFile, stopSession } from '../helpers.mjs';

export const name = 'mixed-mode';
/** A Failure is recorded and the run goes on. */
export const soft = 'failures';

/** A program that runs the example model. */
export function prepare({ ws }) {
	writeFileSync(
		join(ws, 'infer.py'),
		'import sys\n\nimport numpy as np\nimport onnxruntime as ort\n\nsession = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])\n' +
			'image = np.full((1, 3, 32, 32), 0.5, np.float32)\n(probs,) = session.run(None, {"image": image})\nprint("probs", probs.shape, flush=True)\n',
	);
}

export async function run({ page, ws, shot }) {
	const config = { type: 'graph-dap', request: 'launch', name: 'Program and its model', program: '${workspaceFolder}/infer.py', args: ['${workspaceFolder}/nan_demo.onnx'], stopOnSessionRun: true };
	mkdirSync(join(ws, '.vscode'), { recursive: true });
	writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
	const line = readFileSync(join(ws, 'infer.py'), 'utf8').split('\n').findIndex((l) => l.startsWith('image =')) + 1;
	await openFile(page, 'infer.py', 'infer.py', 30000);
	await goTo(page, line);
	await page.keyboard.press('F9');
	await page.locator('.editor-instance .codicon-debug-breakpoint').first().waitFor({ state: 'visible', timeout: 10000 });
	check(true, `a Python breakpoint in the editor, infer.py line ${line}`);
	await page.keyboard.press('F5');
	await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
	await page.locator('.editor-instance .debug-top-stack-frame-line').first().waitFor({ state: 'visible', timeout: 90000 });
	const status = await page.locator('.statusbar-item[id="status.editor.selection"]').innerText();
	check(new RegExp(`Ln ${line},`).test(status), `F5 on the program: paused at the Python breakpoint (${status})`);
	await shot('mixed-python-breakpoint');
	await page.locator('.debug-toolbar .codicon-debug-continue').first().click();
	await callStackRow(page, 'graph: nan_demo.onnx, run #1').waitFor({ state: 'visible', timeout: 90000 });
	await callStackRow(page, 'MainThread').waitFor({ state: 'visible', timeout: 30000 });
	const rows = await page.locator('.debug-call-stack .monaco-list-row').allInnerTexts();
	check(rows.some((r) => r.includes('graph: nan_demo.onnx, run #1')) && rows.some((r) => r.includes('MainThread')), `the graph stopped in run: both threads in the call stack (${rows.map((r) => r.split('\n')[0]).join(' | ')})`);
	await shot('mixed-graph-stop');
	await stopSession(page);
	rmSync(join(ws, '.vscode', 'launch.json'), { force: true });
}
