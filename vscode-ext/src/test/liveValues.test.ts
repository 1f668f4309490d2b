// Between the debug adapter and the listing's language server: settings, debug states, live answers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { liveAnswer, samePath, serverSettings, stateFromAdapter, stateFromClient } from '../liveValues';

test('the server settings come from graphDap.listing.*, with their defaults', () => {
	const none = serverSettings(<T>(_key: string, fallback: T) => fallback);
	assert.deepEqual(none, { providers: ['CPUExecutionProvider'], typeHints: true, liveInlayHints: false, codeLens: false });
	const set: Record<string, unknown> = { 'listing.providers': ['CUDAExecutionProvider', 'CPUExecutionProvider'], 'listing.liveInlayHints': true, 'listing.typeHints': false };
	const got = serverSettings(<T>(key: string, fallback: T) => (key in set ? (set[key] as T) : fallback));
	assert.deepEqual(got, { providers: ['CUDAExecutionProvider', 'CPUExecutionProvider'], typeHints: false, liveInlayHints: true, codeLens: false });
	const bad = serverSettings(<T>(key: string, fallback: T) => (key === 'listing.providers' ? ([3] as T) : fallback));
	assert.deepEqual(bad.providers, ['CPUExecutionProvider']);
});

test('stopped, continued and terminated events; resuming requests', () => {
	assert.equal(stateFromAdapter({ type: 'event', event: 'stopped' }), 'stopped');
	assert.equal(stateFromAdapter({ type: 'event', event: 'continued' }), 'running');
	assert.equal(stateFromAdapter({ type: 'event', event: 'terminated' }), 'ended');
	assert.equal(stateFromAdapter({ type: 'event', event: 'output' }), undefined);
	assert.equal(stateFromAdapter({ type: 'response' }), undefined);
	for (const command of ['continue', 'next', 'stepBack', 'goto', 'graphDap/runTo']) {
		assert.equal(stateFromClient({ type: 'request', command }), 'running', command);
	}
	assert.equal(stateFromClient({ type: 'request', command: 'variables' }), undefined);
});

test('the live answer keeps the adapter summaries of the names asked', () => {
	const body = {
		summaries: [
			{ name: 'a', text: 'float32[2] min=0 max=1 mean=0.5', available: true },
			{ name: 'b', text: '', available: false },
			{ name: 'other', text: 'x', available: true },
			{ name: 3, text: 'y' },
		],
	};
	assert.deepEqual(liveAnswer(['a', 'b'], body), {
		summaries: [
			{ name: 'a', text: 'float32[2] min=0 max=1 mean=0.5', available: true, stale: false },
			{ name: 'b', text: '', available: false, stale: false },
		],
	});
	assert.deepEqual(liveAnswer(['a'], undefined), { summaries: [] });
	assert.deepEqual(liveAnswer('a', body), { summaries: [] });
});

test('paths compare with slashes and case as the platform wants', () => {
	assert.ok(samePath('/w/m.onnx', '/w/m.onnx', false));
	assert.ok(!samePath('/w/M.onnx', '/w/m.onnx', false));
	assert.ok(samePath('C:\\w\\M.onnx', 'c:/w/m.onnx', true));
});
