// "debugServer" in launch.json: VS Code connects to a running adapter (graph-dap adapter --port).

import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { Failure, callStackRow, check, launches, python, sleep, stopSession } from '../helpers.mjs';

export const name = 'debug-server';

export async function run({ page, server, ws, shot }) {
	const adapter = spawn(python, ['-m', 'graph_dap.adapter', '--port', '0'], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
	try {
		const port = await new Promise((resolve, reject) => {
			let out = '';
			adapter.stdout.on('data', (d) => {
				out += d;
				const m = /listening on [^:\s]+:(\d+)/.exec(out);
				if (m) resolve(Number(m[1]));
			});
			adapter.on('exit', (code) => reject(new Failure(`graph-dap adapter --port 0 exited (${code}) before listening`)));
			setTimeout(() => reject(new Failure('graph-dap adapter --port 0 printed no port in 30s')), 30000);
		});
		mkdirSync(join(ws, '.vscode'), { recursive: true });
		const config = { type: 'graph-dap', request: 'launch', name: 'ONNX over TCP', model: '${workspaceFolder}/nan_demo.onnx', stopOnEntry: true, debugServer: port };
		writeFileSync(join(ws, '.vscode', 'launch.json'), JSON.stringify({ version: '0.2.0', configurations: [config] }, null, 2));
		await sleep(1500);
		await page.locator('.editor-instance .view-lines').first().click();
		await page.keyboard.press('F5');
		await page.locator('.debug-toolbar').first().waitFor({ state: 'visible', timeout: 60000 });
		await page.keyboard.press('Control+Shift+D');
		await callStackRow(page, 'stem/conv').waitFor({ state: 'visible', timeout: 60000 });
		const launch = launches(server).pop();
		check(launch?.msg.arguments.debugServer === port, `debugServer ${port}: connected to the running adapter, stopped on entry at stem/conv`);
		await shot('debug-server');
		await stopSession(page);
	} finally {
		try {
			process.kill(-adapter.pid, 'SIGKILL');
		} catch {
			// gone already
		}
	}
}
