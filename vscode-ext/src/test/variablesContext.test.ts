import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tensorNameFromContext } from '../variablesContext';

test('a tensor in a scope is asked for by its value name', () => {
	const ctx = { container: { name: 'Values', variablesReference: 3, expensive: false }, variable: { name: 'conv/out:0', evaluateName: '`conv/out:0`', type: 'tensor(float)' } };
	assert.equal(tensorNameFromContext(ctx), 'conv/out:0');
});

test('a slice of a tensor by its evaluateName', () => {
	const ctx = { container: { name: 'x', variablesReference: 7, evaluateName: 'x' }, variable: { name: '[0]', evaluateName: 'x[0]', type: 'tensor(float)' } };
	assert.equal(tensorNameFromContext(ctx), 'x[0]');
});

test('no variable: nothing', () => {
	assert.equal(tensorNameFromContext({}), undefined);
});
