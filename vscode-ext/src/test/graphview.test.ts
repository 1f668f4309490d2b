// The graph view's renderer without a browser: the items and edges built from graph-dap's
// document, the layout (collapsed modules, nested bodies, what a module's opening lays out again),
// overlays as colour with their legend, where a NaN started and spread, the SVG export, pan and zoom.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { GraphDoc, NodeRow, Overlay } from '../graphview/doc';
import { nodeAtLine, nodeFromDescription, nodesAtLines, nonFinite, spreadOf, watchedNodes, watchedValues } from '../graphview/follow';
import { Box, Engine, Layouter, Scene, dagreEngine } from '../graphview/layout';
import { CHUNK_SIZE, GraphModel, Kind } from '../graphview/model';
import { ORIGIN_COLOR, SPREAD_COLOR, itemColors, legendText, markedItems, metricScale, nonFiniteItems, position, scaleColor } from '../graphview/overlay';
import { emptyMarks, paint } from '../graphview/paint';
import { theme } from '../graphview/style';
import { pathData, sceneSvg } from '../graphview/svg';
import { distanceToPolyline, fitBox, toScreen, toWorld, zoomAt } from '../graphview/viewport';

/**
 * A document as graph-dap writes it, from a chain of nodes: `[id, op, module path or '', inputs]`,
 * each node's output named `<id>.out`; `x` is the graph's input, the last node's output its output.
 */
function chainDoc(spec: [string, string, string, string[]][]): GraphDoc {
	const values: GraphDoc['values'] = [['x', 'float32[1,4]', -1, 0]];
	const index = new Map<string, number>([['x', 0]]);
	const modules: GraphDoc['modules'] = [];
	const moduleIndex = new Map<string, number>();
	const moduleOf = (path: string): number => {
		if (!path) return -1;
		const known = moduleIndex.get(path);
		if (known !== undefined) return known;
		const cut = path.lastIndexOf('/');
		const parent = cut > 0 ? moduleOf(path.slice(0, cut)) : -1;
		moduleIndex.set(path, modules.length);
		modules.push([path, '', parent, 0]);
		return modules.length - 1;
	};
	const nodes: NodeRow[] = spec.map(([id, op, module, inputs], row) => {
		const out = `${id}.out`;
		index.set(out, values.length);
		values.push([out, 'float32[1,4]', row, 0]);
		return [id, op, 0, moduleOf(module), 10 + row, inputs.map((i) => index.get(i)!), [index.get(out)!], 0, ''];
	});
	return { format: 'graph-dap-graph', version: 1, model: 'm.onnx', path: null, scopes: [[-1, '', [0], [values.length - 1]]], modules, values, nodes };
}

/** Two blocks of three nodes (modules `enc/b0`, `enc/b1` in `enc`), a head; b1 reads b0's output and x. */
const blocks = (): GraphDoc =>
	chainDoc([
		['enc/b0/mm', 'MatMul', 'enc/b0', ['x']],
		['enc/b0/add', 'Add', 'enc/b0', ['enc/b0/mm.out']],
		['enc/b0/relu', 'Relu', 'enc/b0', ['enc/b0/add.out']],
		['enc/b1/mm', 'MatMul', 'enc/b1', ['enc/b0/relu.out']],
		['enc/b1/add', 'Add', 'enc/b1', ['enc/b1/mm.out', 'x']],
		['enc/b1/relu', 'Relu', 'enc/b1', ['enc/b1/add.out']],
		['head', 'Softmax', '', ['enc/b1/relu.out']],
	]);

/** A Loop whose body holds two nodes, one of them reading a value of the main graph. */
function loopDoc(): GraphDoc {
	return {
		format: 'graph-dap-graph',
		version: 1,
		model: 'loop.onnx',
		path: null,
		scopes: [
			[-1, '', [0], [3]],
			[1, 'body', [4, 5], [7]],
		],
		modules: [],
		values: [
			['x', 'float32[2]', -1, 0],
			['pre', 'float32[2]', 0, 0],
			['trip', 'int64[]', -1, 1],
			['y', 'float32[2]', 1, 0],
			['i', 'int64[]', -1, 0],
			['acc', 'float32[2]', -1, 0],
			['t', 'float32[2]', 2, 0],
			['acc_out', 'float32[2]', 3, 0],
		],
		nodes: [
			['pre', 'Relu', 0, -1, 5, [0], [1], 0, 'pre = Relu(x)'],
			['loop', 'Loop', 0, -1, 6, [2, 1], [3], 2, 'y = Loop(trip, pre)'],
			['loop/body/Tanh_0', 'Tanh', 1, -1, 7, [5], [6], 0, 't = Tanh(acc)'],
			['loop/body/Add_1', 'Add', 1, -1, 8, [6, 1], [7], 0, 'acc_out = Add(t, pre)'],
		],
	};
}

function keys(model: GraphModel, scene: Scene): string[] {
	return scene.boxes.map((b) => model.items[b.item].key);
}

function inside(inner: Box, outer: Box): boolean {
	return inner.x >= outer.x - 1e-6 && inner.y >= outer.y - 1e-6 && inner.x + inner.w <= outer.x + outer.w + 1e-6 && inner.y + inner.h <= outer.y + outer.h + 1e-6;
}

function overlap(a: Box, b: Box): boolean {
	return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

describe('items', () => {
	test('modules nest by path; a node stands in its innermost module; inputs and outputs are items', () => {
		const m = new GraphModel(blocks());
		const enc = m.items.find((it) => it.key === 'module:0:enc')!;
		assert.equal(enc.kind, Kind.Module);
		assert.deepEqual(enc.children.map((c) => m.items[c].label), ['b0', 'b1']);
		assert.equal(enc.nodes, 6);
		assert.equal(m.items[m.items[m.itemOfNode('enc/b1/add')].parent].key, 'module:0:enc/b1');
		assert.deepEqual(m.root.children.map((c) => m.items[c].key), ['in:0:0', 'module:0:enc', 'head', 'out:0:7']);
	});

	test('edges follow values, from a graph input too; a node reads a value once per input', () => {
		const m = new GraphModel(blocks());
		const edge = (from: string, to: string) => m.edges.some((e) => m.items[e.from].key === from && m.items[e.to].key === to);
		assert.ok(edge('in:0:0', 'enc/b0/mm') && edge('in:0:0', 'enc/b1/add') && edge('enc/b0/relu', 'enc/b1/mm') && edge('head', 'out:0:7'));
		assert.equal(m.edges.length, 9);
	});

	test('a module of one node is no group', () => {
		const m = new GraphModel(chainDoc([['a/only', 'Relu', 'a', ['x']], ['b/one', 'Relu', 'b', ['a/only.out']], ['b/two', 'Relu', 'b', ['b/one.out']]]));
		assert.equal(m.items.some((it) => it.key === 'module:0:a'), false);
		assert.equal(m.items[m.itemOfNode('a/only')].parent, 0);
		assert.ok(m.items.some((it) => it.key === 'module:0:b'));
	});

	test("a Loop's body is a group in the Loop node; a value of the main graph read in it is an edge into it", () => {
		const m = new GraphModel(loopDoc());
		const loop = m.items[m.itemOfNode('loop')];
		assert.ok(loop.expandable);
		const body = m.items[loop.children[0]];
		assert.equal(body.kind, Kind.Scope);
		assert.equal(body.label, 'body');
		assert.deepEqual(body.children.map((c) => m.items[c].key), ['in:1:4', 'in:1:5', 'loop/body/Tanh_0', 'loop/body/Add_1', 'out:1:7']);
		assert.ok(m.edges.some((e) => m.items[e.from].key === 'pre' && m.items[e.to].key === 'loop/body/Add_1'));
		assert.ok(!m.edges.some((e) => m.doc.values[e.value][0] === 'trip'), 'no edge from an initializer');
		assert.deepEqual(m.downstream(0).map((r) => m.doc.nodes[r][0]), ['loop', 'loop/body/Add_1']);
		assert.deepEqual(m.downstream(2).map((r) => m.doc.nodes[r][0]), ['loop', 'loop/body/Add_1'], 'a value made in a body reaches on through its Loop');
	});

	test('a group of more than 150 children is split into runs of at most 100, in run order', () => {
		const spec: [string, string, string, string[]][] = [];
		for (let i = 0; i < 330; i++) spec.push([`n${i}`, 'Relu', '', [i ? `n${i - 1}.out` : 'x']]);
		const m = new GraphModel(chainDoc(spec));
		const chunks = m.root.children.filter((c) => m.items[c].chunk);
		assert.equal(chunks.length, 4);
		assert.ok(chunks.every((c) => m.items[c].children.length <= CHUNK_SIZE));
		assert.deepEqual(chunks.map((c) => m.items[c].label), ['nodes 1–83', 'nodes 84–166', 'nodes 167–249', 'nodes 250–330']);
		assert.equal(m.items[m.itemOfNode('n200')].depth, 2);
	});

	test("a node's listing line is written again from the columns", () => {
		const doc = blocks();
		doc.nodes[1][8] = '<alpha=0.5>  # model.py:3';
		const m = new GraphModel(doc);
		assert.equal(m.lineText(1), 'enc/b0/add.out: float32[1,4] = Add<alpha=0.5>(enc/b0/mm.out)  # model.py:3');
		assert.equal(m.lineText(4), 'enc/b1/add.out: float32[1,4] = Add(enc/b1/mm.out, x)');
	});

	test('search: the exact id first, then ids, ops and values that contain the text', () => {
		const m = new GraphModel(blocks());
		assert.deepEqual(m.search('head').map((h) => m.doc.nodes[h.row][0]), ['head']);
		assert.deepEqual(m.search('b1/add').map((h) => h.why), ['node', 'value enc/b1/add.out']); // enc/b1/relu reads it
		assert.deepEqual(m.search('matmul').map((h) => m.doc.nodes[h.row][0]), ['enc/b0/mm', 'enc/b1/mm']);
		assert.deepEqual(m.search(''), []);
	});
});

describe('layout', () => {
	test('closed modules: one box each, edges between them; every shown box inside its group, siblings apart', () => {
		const m = new GraphModel(blocks());
		const l = new Layouter(m);
		const closed = l.scene(new Set());
		assert.deepEqual(keys(m, closed), ['scope:0', 'in:0:0', 'module:0:enc', 'head', 'out:0:7']);
		const enc = m.items.findIndex((it) => it.key === 'module:0:enc');
		const b0 = m.items.findIndex((it) => it.key === 'module:0:enc/b0');
		const b1 = m.items.findIndex((it) => it.key === 'module:0:enc/b1');
		const open = l.scene(new Set([enc, b1]));
		assert.deepEqual(keys(m, open).sort(), ['enc/b1/add', 'enc/b1/mm', 'enc/b1/relu', 'head', 'in:0:0', 'module:0:enc', 'module:0:enc/b0', 'module:0:enc/b1', 'out:0:7', 'scope:0'].sort());
		assert.equal(open.shownAs[m.itemOfNode('enc/b0/add')], b0, 'a node in a closed module is shown as the module');
		for (const b of open.boxes) {
			const parent = m.items[b.item].parent;
			if (parent >= 0) assert.ok(inside(b, open.box.get(parent)!), `${m.items[b.item].key} inside its group`);
		}
		const siblings = open.boxes.filter((b) => m.items[b.item].parent === enc);
		assert.ok(!overlap(siblings[0], siblings[1]));
		const edge = (a: string, b: string) => open.edges.some((e) => m.items[e.from].key === a && m.items[e.to].key === b);
		assert.ok(edge('module:0:enc/b0', 'enc/b1/mm') && edge('in:0:0', 'enc/b1/add') && edge('in:0:0', 'module:0:enc/b0'));
		// Layered: each edge runs downwards.
		for (const e of open.edges) assert.ok(open.box.get(e.from)!.y < open.box.get(e.to)!.y, `${m.items[e.from].key} above ${m.items[e.to].key}`);
	});

	test('opening a module lays out that module and its ancestors only; the rest comes from the cache', () => {
		const m = new GraphModel(blocks());
		const calls: number[][] = [];
		const counting: Engine = (nodes, edges) => {
			calls.push(nodes.map((n) => n.id));
			return dagreEngine(nodes, edges);
		};
		const l = new Layouter(m, counting);
		const enc = m.items.findIndex((it) => it.key === 'module:0:enc');
		const b0 = m.items.findIndex((it) => it.key === 'module:0:enc/b0');
		const b1 = m.items.findIndex((it) => it.key === 'module:0:enc/b1');
		l.scene(new Set([enc, b0]));
		assert.equal(l.laidOut, 3); // root, enc, b0
		l.scene(new Set([enc, b0, b1]));
		assert.equal(l.laidOut, 3); // b1, then enc and the root (their children's sizes changed); b0 reused
		assert.ok(calls.slice(3).every((ids) => !ids.includes(m.itemOfNode('enc/b0/mm'))));
		l.scene(new Set([enc, b0, b1]));
		assert.equal(l.laidOut, 0);
	});

	test("an open Loop shows its body inside it, the body's nodes inside the body", () => {
		const m = new GraphModel(loopDoc());
		const loop = m.itemOfNode('loop');
		const s = new Layouter(m).scene(new Set([loop]));
		const body = m.items[loop].children[0];
		assert.ok(s.box.get(loop)!.open && s.box.get(body)!.open);
		assert.ok(inside(s.box.get(body)!, s.box.get(loop)!));
		assert.ok(inside(s.box.get(m.itemOfNode('loop/body/Add_1'))!, s.box.get(body)!));
		const closed = new Layouter(m).scene(new Set());
		assert.equal(closed.shownAs[m.itemOfNode('loop/body/Add_1')], loop);
	});

	test('a value read by many children is drawn but not laid out (an attention mask read by every layer)', () => {
		const spec: [string, string, string, string[]][] = [];
		for (let i = 0; i < 12; i++) spec.push([`l${i}/mm`, 'MatMul', `l${i}`, [i ? `l${i - 1}/add.out` : 'x']], [`l${i}/add`, 'Add', `l${i}`, [`l${i}/mm.out`, 'x']]);
		const m = new GraphModel(chainDoc(spec));
		const seen: [number, number][][] = [];
		const s = new Layouter(m, (nodes, edges) => (seen.push(edges), dagreEngine(nodes, edges))).scene(new Set());
		const input = m.items.findIndex((it) => it.key === 'in:0:0');
		assert.equal(s.edges.filter((e) => e.from === input).length, 12);
		assert.ok(seen[0].every(([a]) => a !== input));
	});
});

describe('overlays', () => {
	const compare: Overlay = {
		kind: 'compare',
		title: 'compare',
		source: 'c.json',
		metrics: [
			{ key: 'snr', label: 'SQNR (dB)', worse: 'low' },
			{ key: 'max_abs', label: 'max |run - reference|', worse: 'high', log: true },
		],
		values: {
			'enc/b0/mm': { snr: 'inf', max_abs: 0 },
			'enc/b0/add': { snr: 60, max_abs: 1e-6 },
			'enc/b1/mm': { snr: 20, max_abs: 1e-2 },
			head: { snr: 40, max_abs: 1e-4 },
		},
		marks: { 'enc/b1/mm': 'the first divergence' },
	};

	test('a metric where lower is worse: the lowest SQNR is the worst end, "inf" (identical) the best', () => {
		const scale = metricScale(compare, 'snr');
		assert.deepEqual([scale.lo, scale.hi, scale.count], [20, 60, 4]);
		assert.equal(position(scale, 20), 1);
		assert.equal(position(scale, 60), 0);
		assert.equal(position(scale, Infinity), 0);
		assert.equal(position(scale, NaN), 1);
		assert.deepEqual(legendText(scale, String), { label: 'SQNR (dB)', best: '60', worst: '20' });
	});

	test('a log scale where higher is worse; zero has no place on it and counts as the best', () => {
		const scale = metricScale(compare, 'max_abs');
		assert.deepEqual([scale.lo, scale.hi], [1e-6, 1e-2]);
		assert.ok(Math.abs(position(scale, 1e-4) - 0.5) < 1e-9);
		assert.equal(position(scale, 0), 0);
		assert.equal(legendText(scale, String).label, 'max |run - reference| (log scale)');
	});

	test('a closed module takes the worst colour inside it; nodes without a value keep theirs', () => {
		const m = new GraphModel(blocks());
		const scale = metricScale(compare, 'snr');
		const colors = itemColors(m, compare, scale);
		const b1 = m.items.findIndex((it) => it.key === 'module:0:enc/b1');
		const enc = m.items.findIndex((it) => it.key === 'module:0:enc');
		assert.deepEqual(colors[b1], scaleColor(1));
		assert.deepEqual(colors[enc], scaleColor(1));
		assert.deepEqual(colors[m.itemOfNode('enc/b0/add')], scaleColor(0));
		assert.equal(colors[m.itemOfNode('enc/b1/relu')], undefined);
		assert.equal(colors[0], undefined);
		assert.deepEqual([...markedItems(m, compare)].map((i) => m.items[i].key).sort(), ['enc/b1/mm', 'module:0:enc', 'module:0:enc/b1', 'scope:0']);
	});

	test('the paint: overlay fill on closed items, NaN colours over it, the current node ringed', () => {
		const m = new GraphModel(blocks());
		const s = new Layouter(m).scene(new Set());
		const marks = emptyMarks();
		const enc = m.items.findIndex((it) => it.key === 'module:0:enc');
		marks.colors = itemColors(m, compare, metricScale(compare, 'snr'));
		const t = theme(false);
		assert.deepEqual(paint(m, s.box.get(enc)!, marks, t).fill, scaleColor(1));
		marks.nonFinite = nonFiniteItems(m, ['enc/b1/mm'], ['head']);
		marks.current = s.shownAs[m.itemOfNode('enc/b1/mm')];
		const p = paint(m, s.box.get(enc)!, marks, t);
		assert.deepEqual(p.fill, ORIGIN_COLOR);
		assert.deepEqual(p.ring, t.current);
		assert.ok(p.dash, 'a closed module holding the current node: a dashed ring');
		assert.deepEqual(paint(m, s.box.get(m.itemOfNode('head'))!, marks, t).fill, SPREAD_COLOR);
	});
});

describe('following the debugger', () => {
	test('a listing line is its node; breakpoints only on node lines', () => {
		const m = new GraphModel(blocks());
		assert.equal(nodeAtLine(m, 12), 'enc/b0/relu');
		assert.equal(nodeAtLine(m, 3), 'enc/b0/mm');
		assert.equal(nodeAtLine(m, 99), undefined);
		assert.deepEqual(nodesAtLines(m, [10, 11, 3]), ['enc/b0/mm', 'enc/b0/add']);
	});

	test("a NaN stop's description names its node", () => {
		const m = new GraphModel(blocks());
		assert.equal(nodeFromDescription(m, 'enc/b1/add (Add) produced 3 NaN in \'enc/b1/add.out\' at index [0, 1]'), 'enc/b1/add');
		assert.equal(nodeFromDescription(m, 'elsewhere (Add) produced 3 NaN'), undefined);
	});

	test('summaries that hold NaN or Inf', () => {
		assert.ok(nonFinite('float32[1,8] min=0 max=1 mean=0.5 nan=3'));
		assert.ok(nonFinite('float32[2] min=0 max=1 mean=0.5 inf=1'));
		assert.ok(nonFinite('float32[] = nan') && nonFinite('float32[1] = -inf'));
		assert.ok(!nonFinite('float32[1,8] min=0 max=1 mean=0.5') && !nonFinite('float32[3] not computed yet (nan has not run)'));
	});

	test('where the NaN started (its inputs finite) and where it spread, from the values after the NaN stop', () => {
		const m = new GraphModel(blocks());
		const rows = watchedNodes(m, ['enc/b0/add']);
		assert.deepEqual(rows.map((r) => m.doc.nodes[r][0]), ['enc/b0/add', 'enc/b0/relu', 'enc/b1/mm', 'enc/b1/add', 'enc/b1/relu', 'head']);
		const names = watchedValues(m, rows);
		assert.ok(names.includes('enc/b0/mm.out') && names.includes('x'));
		const summaries = new Map([
			['x', 'float32[1,4] min=0 max=1 mean=0.5'],
			['enc/b0/mm.out', 'float32[1,4] min=0 max=1 mean=0.5'],
			['enc/b0/add.out', 'float32[1,4] min=0 max=1 mean=0.5 nan=1'],
			['enc/b0/relu.out', 'float32[1,4] min=0 max=1 mean=0.5 nan=1'],
			['enc/b1/mm.out', 'float32[1,4] min=0 max=1 mean=0.5 nan=4'],
		]);
		assert.deepEqual(spreadOf(m, rows, summaries), { origin: ['enc/b0/add'], spread: ['enc/b0/relu', 'enc/b1/mm'] });
	});
});

describe('export and viewport', () => {
	test('the SVG has a box per shown item and a path per edge, with the paint', () => {
		const m = new GraphModel(blocks());
		const s = new Layouter(m).scene(new Set());
		const marks = emptyMarks();
		marks.breakpoints.set(m.itemOfNode('head'), 1);
		const svg = sceneSvg(m, s, marks, theme(false), 'm.onnx');
		assert.equal((svg.match(/<g data-item=/g) ?? []).length, s.boxes.length - 1);
		assert.equal((svg.match(/marker-end=/g) ?? []).length, s.edges.length);
		assert.ok(svg.includes('data-item="head"') && svg.includes('<circle'));
		assert.ok(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'));
		assert.equal(pathData([0, 0, 10, 10]), 'M0,0L10,10');
		assert.equal(pathData([0, 0, 10, 0, 10, 10]), 'M0,0Q10,0 10,5L10,10');
	});

	test('zoom keeps the point under the cursor; fit shows the whole box; distances to edges', () => {
		const vp = { k: 1, x: 10, y: 20 };
		const z = zoomAt(vp, 100, 50, 2);
		assert.deepEqual(toWorld(z, 100, 50), toWorld(vp, 100, 50));
		const f = fitBox(0, 0, 1000, 500, 500, 300, 0);
		assert.equal(f.k, 0.5);
		assert.deepEqual(toScreen(f, 0, 0), [0, 25]);
		assert.equal(distanceToPolyline([0, 0, 10, 0], 5, 3), 3);
	});
});

test('the graph view is contributed: in the editor title of a listing or a model, the explorer on .onnx and .json', () => {
	const pkg = require('../../package.json');
	const c = pkg.contributes;
	assert.ok(c.commands.some((x: { command: string; title: string }) => x.command === 'graphDap.showGraph' && x.title === 'Show Graph View'));
	assert.ok(c.menus['editor/title'].some((x: { command: string; when: string }) => x.command === 'graphDap.showGraph' && /onnx-listing/.test(x.when) && /graphDap\.model/.test(x.when)));
	const explorer = c.menus['explorer/context'];
	assert.ok(explorer.some((x: { command: string; when: string }) => x.command === 'graphDap.showGraph' && x.when === 'resourceExtname == .onnx'));
	assert.ok(explorer.some((x: { command: string; when: string }) => x.command === 'graphDap.graphOverlay' && x.when === 'resourceExtname == .json'));
	assert.equal(c.configuration.properties['graphDap.graphView.openOnStop'].default, false);
});
