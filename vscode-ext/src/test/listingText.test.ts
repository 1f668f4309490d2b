import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hoverExpression, parseNodeLine, valueNameAt } from '../listingText';

describe('node lines', () => {
	test('outputs, op type, inputs and node id', () => {
		assert.deepEqual(parseNodeLine('conv1_out: float32[1,64,112,112] = Conv<kernel_shape=[7,7], strides=[2,2]>(x, conv1.weight, conv1.bias)  # conv1'), {
			indent: 0,
			opType: 'Conv',
			nodeId: 'conv1',
			outputs: ['conv1_out'],
			inputs: ['x', 'conv1.weight', 'conv1.bias'],
		});
	});

	test('names with / . : - and several outputs, missing ones as _', () => {
		const n = parseNodeLine('/h.0/attn/out:0: float32[B,8], _ = com.microsoft.Attention<num_heads=8>(/h.0/ln-1/y, _, w)  # /h.0/attn/Attention')!;
		assert.equal(n.opType, 'com.microsoft.Attention');
		assert.deepEqual(n.outputs, ['/h.0/attn/out:0']);
		assert.deepEqual(n.inputs, ['/h.0/ln-1/y', 'w']);
		assert.equal(n.nodeId, '/h.0/attn/Attention');
	});

	test('static nodes are marked (constant) after their id', () => {
		assert.equal(parseNodeLine('c: int64[2] = Constant<value=[1,-1]>()  # Constant_3  (constant)')!.nodeId, 'Constant_3');
	});

	test('a Python source line after the id is not part of it', () => {
		assert.equal(parseNodeLine('softmax: float32[1,8,8] = Softmax<axis=-1>(mul)  # node_softmax  # tinymodel.py:18')!.nodeId, 'node_softmax');
		assert.equal(parseNodeLine('c: int64[1] = Constant<value=[2]>()  # c0  (constant)  # model.py:7')!.nodeId, 'c0');
	});

	test('headers, braces and returns are not nodes; subgraph nodes are indented', () => {
		for (const line of ['# graph-dap listing of m.onnx', '', '  then_branch(x: float32[1]) {', '    return y', '  }']) {
			assert.equal(parseNodeLine(line), undefined, line);
		}
		const inner = parseNodeLine('    y = Add(x, one)')!;
		assert.equal(inner.indent, 4);
		assert.equal(inner.nodeId, '');
	});
});

describe('hovers', () => {
	const line = 'norm_var_eps: float32[1,8,1,1] = Sub(norm_var, norm.eps)  # norm/var_eps';

	test('the value name under the cursor', () => {
		assert.deepEqual(valueNameAt(line, 3), { start: 0, end: 12, name: 'norm_var_eps' });
		assert.equal(valueNameAt(line, line.indexOf('norm.eps') + 2)!.name, 'norm.eps');
		assert.equal(valueNameAt(line, line.indexOf('float32') + 1), undefined, 'a dtype is no value');
		assert.equal(valueNameAt(line, line.indexOf('Sub') + 1), undefined, 'nor is an op type');
		assert.equal(valueNameAt(line, line.length - 2), undefined, 'nor is the node id');
	});

	test('names that are not identifiers go in backticks', () => {
		assert.equal(hoverExpression('norm_var'), 'norm_var');
		assert.equal(hoverExpression('norm.eps'), '`norm.eps`');
		assert.equal(hoverExpression('/h.0/attn/out:0'), '`/h.0/attn/out:0`');
	});
});
