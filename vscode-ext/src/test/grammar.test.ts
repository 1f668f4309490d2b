// The listing grammar, run by VS Code's own tokenizer (vscode-textmate with Oniguruma).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import * as oniguruma from 'vscode-oniguruma';
import * as textmate from 'vscode-textmate';

const root = join(__dirname, '..', '..');
let grammar: textmate.IGrammar;

before(async () => {
	const wasm = readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
	await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength) as ArrayBuffer);
	const registry = new textmate.Registry({
		onigLib: Promise.resolve({ createOnigScanner: (p) => new oniguruma.OnigScanner(p), createOnigString: (s) => new oniguruma.OnigString(s) }),
		loadGrammar: async () => textmate.parseRawGrammar(readFileSync(join(root, 'syntaxes', 'onnx-listing.tmLanguage.json'), 'utf8'), 'onnx-listing.tmLanguage.json'),
	});
	grammar = (await registry.loadGrammar('source.onnx-listing'))!;
});

/** Each token's text with its innermost scope, over several lines. */
function tokens(text: string): [string, string][] {
	let state = textmate.INITIAL;
	const out: [string, string][] = [];
	for (const line of text.split('\n')) {
		const r = grammar.tokenizeLine(line, state);
		for (const t of r.tokens) {
			const s = line.slice(t.startIndex, t.endIndex);
			if (s.trim()) out.push([s, t.scopes[t.scopes.length - 1]]);
		}
		state = r.ruleStack;
	}
	return out;
}

const scopeOf = (ts: [string, string][], text: string) => ts.find(([s]) => s === text)?.[1];

describe('the listing grammar', () => {
	test('a node line', () => {
		const ts = tokens('conv1_out: float32[1,64,112,112] = Conv<kernel_shape=[7,7], strides=[2,2]>(x, conv1.weight, conv1.bias)  # conv1');
		assert.equal(scopeOf(ts, 'conv1_out'), 'variable.other.value.output.onnx-listing');
		assert.equal(scopeOf(ts, 'float32'), 'storage.type.dtype.onnx-listing');
		assert.equal(scopeOf(ts, '64'), 'constant.numeric.integer.onnx-listing');
		assert.equal(scopeOf(ts, '='), 'keyword.operator.assignment.onnx-listing');
		assert.equal(scopeOf(ts, 'Conv'), 'entity.name.function.op-type.onnx-listing');
		assert.equal(scopeOf(ts, 'kernel_shape'), 'entity.other.attribute-name.onnx-listing');
		assert.equal(scopeOf(ts, 'conv1.weight'), 'variable.other.value.onnx-listing');
		assert.equal(scopeOf(ts, 'conv1'), 'entity.name.label.node-id.onnx-listing');
	});

	test('headers are comments', () => {
		const ts = tokens('# graph-dap listing of nan_demo.onnx\n# input  image: float32[1,3,32,32]');
		assert.ok(ts.every(([, s]) => s.startsWith('comment.line') || s.startsWith('punctuation.definition.comment')), JSON.stringify(ts));
	});

	test('names with / . : -, symbolic dims, domains, constants', () => {
		const ts = tokens('/h.0/attn/out:0: float32[batch,8] = com.microsoft.Attention<num_heads=8>(/h.0/ln-1/y)  # /h.0/attn  (constant)');
		assert.equal(scopeOf(ts, '/h.0/attn/out:0'), 'variable.other.value.output.onnx-listing');
		assert.equal(scopeOf(ts, 'batch'), 'variable.parameter.symbolic-dim.onnx-listing');
		assert.equal(scopeOf(ts, 'com.microsoft.Attention'), 'entity.name.function.op-type.onnx-listing');
		assert.equal(scopeOf(ts, '/h.0/ln-1/y'), 'variable.other.value.onnx-listing');
		assert.equal(scopeOf(ts, '/h.0/attn'), 'entity.name.label.node-id.onnx-listing');
		assert.equal(scopeOf(ts, '(constant)'), 'storage.modifier.constant.onnx-listing');
	});

	test('a Python source line after the node id', () => {
		const ts = tokens('softmax: float32[1,8,8] = Softmax<axis=-1>(mul)  # node_softmax  # tinymodel.py:18');
		assert.equal(scopeOf(ts, 'node_softmax'), 'entity.name.label.node-id.onnx-listing');
		assert.equal(scopeOf(ts, '# tinymodel.py:18'), 'comment.line.source.onnx-listing');
	});

	test('subgraphs: header, body, return, brace; the next node line is unaffected', () => {
		const ts = tokens(
			[
				'y: float32[1] = If(cond)  # if0',
				'  then_branch(x: float32[1]) {',
				'    z = Add(x, one)',
				'    return z',
				'  }',
				'w: float32[1] = Relu(y)  # relu',
			].join('\n'),
		);
		assert.equal(scopeOf(ts, 'then_branch'), 'entity.name.section.subgraph.onnx-listing');
		assert.equal(scopeOf(ts, 'return'), 'keyword.control.return.onnx-listing');
		assert.equal(scopeOf(ts, '}'), 'punctuation.section.block.end.onnx-listing');
		assert.equal(scopeOf(ts, 'Relu'), 'entity.name.function.op-type.onnx-listing');
		assert.equal(scopeOf(ts, 'relu'), 'entity.name.label.node-id.onnx-listing');
	});

	test('tensor-valued attributes and strings', () => {
		const ts = tokens("c: float32[3,4] = Constant<value=<float32[3,4]>, mode='constant'>()  # c0");
		assert.equal(scopeOf(ts, 'Constant'), 'entity.name.function.op-type.onnx-listing');
		assert.equal(scopeOf(ts, "'constant'"), 'string.quoted.single.onnx-listing');
		assert.equal(scopeOf(ts, 'c0'), 'entity.name.label.node-id.onnx-listing');
	});
});
