import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
	GraphDapConfiguration,
	configurationForModel,
	describeAdapter,
	finishConfiguration,
	listingNamesSource,
	listingPathFor,
	modelPathFor,
	resolveConfiguration,
} from '../configuration';

const ok = (r: ReturnType<typeof resolveConfiguration>): GraphDapConfiguration => {
	assert.equal(r.kind, 'ok', r.kind === 'error' ? r.message : '');
	return (r as { config: GraphDapConfiguration }).config;
};
const err = (r: ReturnType<typeof resolveConfiguration>): string => {
	assert.equal(r.kind, 'error');
	return (r as { message: string }).message;
};

describe('listing and model paths', () => {
	test('the listing replaces the extension', () => {
		assert.equal(listingPathFor('/m/resnet.onnx'), '/m/resnet.onnxtxt');
		assert.equal(modelPathFor('/m/resnet.onnxtxt'), '/m/resnet.onnx');
		assert.equal(modelPathFor('/m/resnet.onnx'), '/m/resnet.onnx');
		assert.equal(listingPathFor('/m/a.b.onnx'), '/m/a.b.onnxtxt');
	});
});

describe('F5 without a launch.json', () => {
	test('a model in the active editor is debugged', () => {
		const c = ok(resolveConfiguration({}, { activeFile: '/w/nan_demo.onnx' }));
		assert.deepEqual(c, { type: 'graph-dap', request: 'launch', name: 'Debug nan_demo.onnx', model: '/w/nan_demo.onnx' });
	});

	test("a listing in the active editor debugs its model", () => {
		const c = ok(resolveConfiguration({}, { activeFile: '/w/sub/nan_demo.onnxtxt' }));
		assert.equal(c.model, '/w/sub/nan_demo.onnx');
		assert.equal(c.type, 'graph-dap');
		assert.equal(c.request, 'launch');
	});

	test('Ctrl+F5 (noDebug) is kept', () => {
		const c = ok(resolveConfiguration({ noDebug: true }, { activeFile: '/w/m.onnx' }));
		assert.equal(c.noDebug, true);
		assert.equal(c.name, 'Run m.onnx');
	});

	test('another file in the editor: a message that says what to open', () => {
		assert.match(err(resolveConfiguration({}, { activeFile: '/w/notes.txt' })), /Open an ONNX model/);
		// F5 from the model's Python source (a breakpoint set there): the model last active is debugged
		const fromSource = { activeFile: '/w/model.py', recentModel: '/w/tiny.onnxtxt', activeFileIsModelSource: true };
		assert.equal(ok(resolveConfiguration({}, fromSource)).model, '/w/tiny.onnx');
		assert.match(err(resolveConfiguration({}, {})), /\.onnxtxt/);
	});

	test('a Python script in the active editor is debugged with the models it runs', () => {
		const c = ok(resolveConfiguration({}, { activeFile: '/w/infer.py' }));
		assert.deepEqual(c, { type: 'graph-dap', request: 'launch', name: 'Debug infer.py with its models', program: '/w/infer.py' });
		// a model was active before, but this script is not its source: still the script
		const other = ok(resolveConfiguration({}, { activeFile: '/w/infer.py', recentModel: '/w/tiny.onnx', activeFileIsModelSource: false }));
		assert.equal(other.program, '/w/infer.py');
	});

	test('a listing names a Python file as its source by its source comments', () => {
		const listing = '  %3 = Softmax(%2)  # node_softmax  # tinymodel.py:18\n';
		assert.ok(listingNamesSource(listing, '/w/tiny/tinymodel.py'));
		assert.ok(!listingNamesSource(listing, '/w/infer.py'));
		assert.ok(!listingNamesSource(listing, '/w/model.py'));
	});
});

describe('a launch.json configuration', () => {
	test('is kept as written', () => {
		const raw = { type: 'graph-dap', request: 'launch', name: 'x', model: '${workspaceFolder}/m.onnx', stopOnEntry: true, dims: { batch: 2 } };
		assert.deepEqual(ok(resolveConfiguration(raw, { activeFile: '/w/other.onnx' })), raw);
	});

	test('without a model takes the active editor', () => {
		assert.equal(ok(resolveConfiguration({ type: 'graph-dap', request: 'launch', name: 'x' }, { activeFile: '/w/a.onnxtxt' })).model, '/w/a.onnx');
		assert.match(err(resolveConfiguration({ type: 'graph-dap', request: 'launch', name: 'x' }, {})), /no "model"/);
	});

	test('attach is refused', () => {
		assert.match(err(resolveConfiguration({ type: 'graph-dap', request: 'attach', name: 'x', model: 'm.onnx' }, {})), /only "request": "launch"/);
	});
});

describe('after variable substitution', () => {
	const base = { type: 'graph-dap', request: 'launch', name: 'x' };

	test('${file} on a listing names the model', () => {
		assert.equal(ok(finishConfiguration({ ...base, model: '/w/m.onnxtxt' })).model, '/w/m.onnx');
	});

	test('inputs as an object of input name to .npy path', () => {
		assert.deepEqual(ok(finishConfiguration({ ...base, model: '/w/m.onnx', inputs: { image: '/w/x.npy' } })).inputs, { image: '/w/x.npy' });
	});

	test('a single provider becomes a list; a numeric string port a number', () => {
		const c = ok(finishConfiguration({ ...base, model: '/w/m.onnx', providers: 'CPUExecutionProvider' as unknown as string[], debugServer: '4711' as unknown as number }));
		assert.deepEqual(c.providers, ['CPUExecutionProvider']);
		assert.equal(c.debugServer, 4711);
	});

	test('all attributes of the right types pass', () => {
		const full = {
			...base,
			model: '/w/m.onnx',
			inputs: '/w/in.npz',
			dims: { batch: 1, seq: 128 },
			stopOnEntry: false,
			providers: ['CUDAExecutionProvider', 'CPUExecutionProvider'],
			skipConstants: true,
			memoryBudgetMB: 512,
			worker: 'gpu-box:5679',
			token: 's3cret',
			cwd: '/w',
			python: '/venv/bin/python',
			debugServer: 4711,
			listingPath: '/tmp/x/m.onnxtxt',
			breakOn: ['nan', 'inf', 'error'],
			infExclude: ['op:Where', '*mask*'],
			nanExclude: ['softmax'],
		};
		assert.deepEqual(ok(finishConfiguration(full)), full);
	});

	const bad: [string, unknown, RegExp][] = [
		['dims', { batch: -1 }, /"dims" must be an object of dimension names to non-negative integers/],
		['dims', [1], /"dims"/],
		['stopOnEntry', 'yes', /"stopOnEntry" must be true or false, got "yes"/],
		['providers', [1], /"providers"/],
		['memoryBudgetMB', 0, /"memoryBudgetMB" must be a positive number/],
		['worker', 'gpu-box', /"worker" must be "HOST:PORT"/],
		['debugServer', 70000, /"debugServer" must be a port number/],
		['inputs', 3, /"inputs" must be a path/],
		['inputs', { image: 3 }, /"inputs" must be a path .* or an object of input names to \.npy paths/],
		['listingPath', '/tmp/x.txt', /"listingPath"/],
		['breakOn', ['nan', 'sometimes'], /"breakOn" must be a list of exception filters \(nan, inf, error, mismatch\)/],
		['breakOn', 'nan', /"breakOn"/],
		['infExclude', [3], /"infExclude" must be a list of node globs or op:TYPE/],
		['nanExclude', 'softmax', /"nanExclude" must be a list of node globs or op:TYPE/],
	];
	for (const [key, value, message] of bad) {
		test(`a bad "${key}" is refused with a message`, () => {
			assert.match(err(finishConfiguration({ ...base, model: '/w/m.onnx', [key]: value })), message);
		});
	}

	test('no model at all', () => {
		assert.match(err(finishConfiguration({ ...base })), /no "model"/);
	});

	test('a program launch needs no model', () => {
		const program = { ...base, program: '/w/infer.py', args: ['--n', '3'], env: { A: '1', B: null }, stopOnSessionRun: true, justMyCode: false };
		assert.deepEqual(ok(finishConfiguration(program)), program);
		const raw = { type: 'graph-dap', request: 'launch', name: 'x', module: 'pkg.serve' };
		assert.deepEqual(ok(resolveConfiguration(raw, { activeFile: '/w/other.txt' })), raw);
	});

	const badProgram: [string, unknown, RegExp][] = [
		['args', '--n 3', /"args" must be a list of strings/],
		['env', { A: 1 }, /"env" must be an object of names to strings/],
		['stopOnSessionRun', 1, /"stopOnSessionRun" must be true or false/],
	];
	for (const [key, value, message] of badProgram) {
		test(`a program launch with a bad "${key}" is refused with a message`, () => {
			assert.match(err(finishConfiguration({ ...base, program: '/w/infer.py', [key]: value })), message);
		});
	}

	test('program and module together are refused', () => {
		assert.match(err(finishConfiguration({ ...base, program: '/w/a.py', module: 'a' })), /not both/);
	});
});

describe('the adapter', () => {
	test('starts as python -m graph_dap.adapter', () => {
		assert.deepEqual(describeAdapter({}, '/venv/bin/python'), { kind: 'executable', command: '/venv/bin/python', args: ['-m', 'graph_dap.adapter'] });
	});

	test('for a program launch, told so (it lists the Python exception filters at initialize)', () => {
		assert.deepEqual(describeAdapter({ program: '/w/infer.py' }, 'python3'), {
			kind: 'executable',
			command: 'python3',
			args: ['-m', 'graph_dap.adapter'],
			env: { GRAPH_DAP_PROGRAM: '1' },
		});
	});

	test('with debugServer, a running adapter on that port', () => {
		assert.deepEqual(describeAdapter({ debugServer: 4711 }, 'python3'), { kind: 'server', port: 4711, host: '127.0.0.1' });
	});
});

describe('the explorer commands', () => {
	test('Debug and Run ONNX Model', () => {
		assert.deepEqual(configurationForModel('/w/m.onnx'), { type: 'graph-dap', request: 'launch', name: 'Debug m.onnx', model: '/w/m.onnx' });
		assert.deepEqual(configurationForModel('/w/m.onnx', true), { type: 'graph-dap', request: 'launch', name: 'Run m.onnx', model: '/w/m.onnx', noDebug: true });
	});
});
