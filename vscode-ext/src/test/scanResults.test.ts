import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EventReader, ScanEvent, ScanResult, describeFailure, groupFailures, progressMessage, replayConfiguration, scanArguments } from '../scanResults';

const result = (over: Partial<ScanResult>): ScanResult => ({
	index: 0,
	id: 'in_0',
	status: 'nan',
	message: 'm',
	node: { id: 'norm/std', op_type: 'Sqrt', index: 9, where: 'norm/std', path: [] },
	tensor: 'norm_std',
	details: { count: 3 },
	seconds: 0.01,
	replay: { inputs: '/o/failing/in_0.npz', command: 'graph-dap run ...', launch: { type: 'graph-dap', request: 'launch', name: 'Scan: in_0', model: '/m.onnx', inputs: '/o/failing/in_0.npz', breakOn: ['nan', 'inf', 'error'] } },
	...over,
});

describe('the scan command line', () => {
	test('each kind of source', () => {
		assert.deepEqual(scanArguments('/m.onnx', { kind: 'folder', path: '/d' }, '/o'), ['-m', 'graph_dap', 'scan', '/m.onnx', '--inputs', '/d', '--out', '/o', '--json']);
		assert.deepEqual(scanArguments('/m.onnx', { kind: 'glob', pattern: '/d/**/*.npz' }, '/o').slice(4, 6), ['--inputs', '/d/**/*.npz']);
		assert.deepEqual(scanArguments('/m.onnx', { kind: 'samples', path: '/s.npz', axis: 1, batch: 4 }, '/o').slice(4, 10), ['--inputs', '/s.npz', '--sample-axis', '1', '--batch', '4']);
		assert.deepEqual(scanArguments('/m.onnx', { kind: 'generator', target: 'pkg.mod:fn' }, '/o', ['--resume']).slice(4), ['--inputs-from', 'pkg.mod:fn', '--out', '/o', '--json', '--resume']);
	});
});

describe('the JSON lines of a scan', () => {
	test('split across chunks, foreign lines skipped', () => {
		const seen: ScanEvent[] = [];
		const r = new EventReader((e) => seen.push(e));
		r.push('{"event": "start", "total": 3, "resumed": 0, "out": "/o"}\nWARNING something\n{"event": "res');
		r.push('ult", "id": "a", "done": 1, "failed": 0}\n{"event": "end", "done": 3');
		assert.equal(seen.length, 2);
		r.push(', "failed": 1}');
		r.end();
		assert.deepEqual(seen.map((e) => e.event), ['start', 'result', 'end']);
		assert.equal((seen[2] as { failed: number }).failed, 1);
	});
	test('the progress message', () => {
		assert.equal(progressMessage(3, 10, 1), '3/10 inputs, 1 failing');
		assert.equal(progressMessage(3, null, 0), '3 inputs, 0 failing');
	});
});

describe('failing inputs by first bad node', () => {
	test('grouped, most inputs first, those without a node last; clean ones left out', () => {
		const groups = groupFailures([
			result({ index: 4, id: 'b' }),
			result({ index: 1, id: 'a', status: 'inf' }),
			result({ index: 2, id: 'c', node: { id: 'log', op_type: 'Log', index: 1, where: 'log', path: [] } }),
			result({ index: 3, id: 'd', status: 'invalid', node: null, replay: { inputs: null, command: null, launch: null, note: 'the input does not fit the model: nothing to run' } }),
			result({ index: 5, id: 'e', status: 'clean', node: null }),
		]);
		assert.deepEqual(groups.map((g) => g.label), ['norm/std (Sqrt)', 'log (Log)', 'inputs that do not fit the model']);
		assert.deepEqual(groups[0].inputs.map((r) => r.id), ['a', 'b']);
		assert.equal(groups[0].description, '2 inputs: 1 inf, 1 nan');
		assert.equal(groups[2].description, '1 input: 1 invalid');
	});
	test('an input inside a loop says its iteration', () => {
		const r = result({ node: { id: 'xi', op_type: 'Mul', index: 2, where: 'loop > body iteration 2 > xi', path: [{ node: 'loop', attribute: 'body', iteration: 2 }] }, tensor: 'xi', details: { count: 1 } });
		assert.equal(describeFailure(r), 'nan in xi 1x (iteration 2)');
	});
	test('replaying: the launch configuration of scan.json, or why not', () => {
		const ok = replayConfiguration(result({}));
		assert.ok('config' in ok && (ok.config.breakOn as string[]).includes('nan') && ok.config.inputs === '/o/failing/in_0.npz');
		const invalid = replayConfiguration(result({ status: 'invalid', replay: { inputs: null, command: null, launch: null, note: 'the input does not fit the model: nothing to run' } }));
		assert.ok('problem' in invalid && /does not fit/.test(invalid.problem));
		const lost = replayConfiguration(result({ replay: { inputs: null, command: 'x', launch: { type: 'graph-dap' } } }));
		assert.ok('problem' in lost && /not kept/.test(lost.problem));
	});
});
