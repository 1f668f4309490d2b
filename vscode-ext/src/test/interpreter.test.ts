import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { PythonExtensionApi, RunResult, checkGraphDap, chooseInterpreter, expandSetting } from '../interpreter';

const api = (exe?: string, execCommand?: string[]): PythonExtensionApi => ({
	environments: {
		getActiveEnvironmentPath: () => ({ id: 'env', path: exe ?? '/envs/x' }),
		resolveEnvironment: async () => (exe ? { executable: { uri: { fsPath: exe } } } : undefined),
	},
	settings: { getExecutionDetails: () => ({ execCommand }) },
});

describe('the interpreter choice', () => {
	test('the setting graphDap.python wins', async () => {
		let asked = false;
		const r = await chooseInterpreter(' /opt/py/bin/python ', async () => ((asked = true), api('/venv/bin/python')));
		assert.deepEqual(r, { command: '/opt/py/bin/python', source: 'setting graphDap.python' });
		assert.equal(asked, false, 'the Python extension is not even asked');
	});

	test("then the Python extension's chosen interpreter", async () => {
		assert.deepEqual(await chooseInterpreter('', async () => api('/venv/bin/python')), { command: '/venv/bin/python', source: 'Python extension' });
	});

	test("an environment that does not resolve: the extension's execution details", async () => {
		assert.deepEqual(await chooseInterpreter(undefined, async () => api(undefined, ['/usr/bin/python3.12', '-X'])), {
			command: '/usr/bin/python3.12',
			source: 'Python extension',
		});
	});

	test('no Python extension: python3', async () => {
		assert.deepEqual(await chooseInterpreter('', async () => undefined), { command: 'python3', source: 'default' });
	});

	test('a Python extension that fails or knows nothing: python3', async () => {
		assert.deepEqual(await chooseInterpreter('', async () => Promise.reject(new Error('activation failed'))), { command: 'python3', source: 'default' });
		const throwing: PythonExtensionApi = {
			environments: {
				getActiveEnvironmentPath: () => {
					throw new Error('not ready');
				},
				resolveEnvironment: async () => undefined,
			},
		};
		assert.deepEqual(await chooseInterpreter('', async () => throwing), { command: 'python3', source: 'default' });
		assert.deepEqual(await chooseInterpreter('', async () => ({})), { command: 'python3', source: 'default' });
	});

	test('~ and ${workspaceFolder} in the setting', () => {
		assert.equal(expandSetting('~/venv/bin/python', { home: '/home/u' }), '/home/u/venv/bin/python');
		assert.equal(expandSetting('${workspaceFolder}/.venv/bin/python', { workspaceFolder: '/w' }), '/w/.venv/bin/python');
		assert.equal(expandSetting('python3', {}), 'python3');
	});
});

describe('whether graph_dap is importable', () => {
	const fake = (r: Partial<RunResult>) => async () => ({ code: 0, stdout: '', stderr: '', ...r });
	const py = { command: '/venv/bin/python', source: 'Python extension' as const };

	test('importable', async () => {
		assert.deepEqual(await checkGraphDap(py, fake({ code: 0 })), { ok: true });
	});

	test('not importable: says which interpreter and how to install', async () => {
		const r = await checkGraphDap(py, fake({ code: 3 }));
		assert.equal(r.ok, false);
		const m = (r as { message: string }).message;
		assert.match(m, /not importable by the Python interpreter "\/venv\/bin\/python" \(from the Python extension\)/);
		assert.match(m, /-m pip install -e/);
		assert.match(m, /graphDap\.python/);
	});

	test('no such interpreter', async () => {
		const r = await checkGraphDap({ command: 'python9', source: 'default' }, fake({ code: null, errorCode: 'ENOENT' }));
		assert.match((r as { message: string }).message, /"python9" \(from the default\) was not found/);
	});

	test('an interpreter that crashes: its last line', async () => {
		const r = await checkGraphDap(py, fake({ code: 1, stderr: 'Traceback...\nSyntaxError: bad\n' }));
		assert.match((r as { message: string }).message, /failed to start \(SyntaxError: bad\)/);
	});

	test('the probe is valid Python (run by the real python3)', async () => {
		const run = (command: string, args: string[]) =>
			new Promise<RunResult>((resolve) =>
				execFile(command, args, (e, stdout, stderr) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr })),
			);
		const r = await checkGraphDap({ command: 'python3', source: 'default' }, run);
		assert.ok(r.ok || /not importable/.test(r.message), JSON.stringify(r));
	});
});
