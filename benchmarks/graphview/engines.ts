// dagre against elkjs (layered) on the graph view's own work: the layouts of the groups of each
// model, every module open (the largest work a model asks for), the same boxes and edges for both.
// Run by benchmarks/bench_graphview.py (bundled with esbuild from vscode-ext's node_modules).
// Prints one JSON line per model: {model, nodes, groups, largest, dagre_ms, elk_ms, dagre_crossings, elk_crossings}.
import { readFileSync } from 'node:fs';
import ELK from 'elkjs/lib/elk.bundled.js';
import { dagreEngine, Engine, Layouter } from '../../vscode-ext/src/graphview/layout';
import { GraphModel } from '../../vscode-ext/src/graphview/model';
import type { GraphDoc } from '../../vscode-ext/src/graphview/doc';

type Work = { nodes: { id: number; w: number; h: number }[]; edges: [number, number][] };

function crossings(work: Work, pos: Map<number, { x: number; y: number }>): number {
	// Straight segments between box centres, counted pairwise (a proxy for how readable a layout is).
	const seg = work.edges.map(([a, b]) => {
		const na = work.nodes.find((n) => n.id === a)!;
		const nb = work.nodes.find((n) => n.id === b)!;
		const pa = pos.get(a)!;
		const pb = pos.get(b)!;
		return [pa.x + na.w / 2, pa.y + na.h, pb.x + nb.w / 2, pb.y];
	});
	let n = 0;
	const cross = (p: number[], q: number[]) => {
		const d = (ax: number, ay: number, bx: number, by: number, cx: number, cy: number) => (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
		const d1 = d(p[0], p[1], p[2], p[3], q[0], q[1]);
		const d2 = d(p[0], p[1], p[2], p[3], q[2], q[3]);
		const d3 = d(q[0], q[1], q[2], q[3], p[0], p[1]);
		const d4 = d(q[0], q[1], q[2], q[3], p[2], p[3]);
		return d1 * d2 < 0 && d3 * d4 < 0;
	};
	if (seg.length > 3000) return -1;
	for (let i = 0; i < seg.length; i++) for (let j = i + 1; j < seg.length; j++) if (cross(seg[i], seg[j])) n++;
	return n;
}

async function main(): Promise<void> {
	const elk = new ELK();
	for (const file of process.argv.slice(2)) {
		const doc = JSON.parse(readFileSync(file, 'utf8')) as GraphDoc;
		const model = new GraphModel(doc);
		const works: Work[] = [];
		const recorder: Engine = (nodes, edges) => {
			works.push({ nodes, edges });
			return dagreEngine(nodes, edges);
		};
		const all = new Set(model.items.filter((it) => it.expandable).map((it) => it.index));
		new Layouter(model, recorder).scene(all);
		let dagreMs = 0;
		let elkMs = 0;
		let dagreX = 0;
		let elkX = 0;
		// Warm both (ELK's first call sets itself up), then time each group once more.
		for (const w of works.slice(0, 1)) {
			dagreEngine(w.nodes, w.edges);
			await elk.layout({ id: 'warm', children: w.nodes.map((n) => ({ id: String(n.id), width: n.w, height: n.h })), edges: [] });
		}
		for (const w of works) {
			let t = performance.now();
			const d = dagreEngine(w.nodes, w.edges);
			dagreMs += performance.now() - t;
			t = performance.now();
			const g = await elk.layout({
				id: 'root',
				layoutOptions: { 'elk.algorithm': 'layered', 'elk.direction': 'DOWN', 'elk.spacing.nodeNode': '18', 'elk.layered.spacing.nodeNodeBetweenLayers': '30' },
				children: w.nodes.map((n) => ({ id: String(n.id), width: n.w, height: n.h })),
				edges: w.edges.map(([a, b], k) => ({ id: `e${k}`, sources: [String(a)], targets: [String(b)] })),
			});
			elkMs += performance.now() - t;
			const epos = new Map((g.children ?? []).map((c) => [Number(c.id), { x: c.x ?? 0, y: c.y ?? 0 }]));
			const cx = crossings(w, d.pos);
			const ex = crossings(w, epos);
			if (cx >= 0 && ex >= 0) {
				dagreX += cx;
				elkX += ex;
			}
		}
		const largest = Math.max(...works.map((w) => w.nodes.length));
		console.log(JSON.stringify({ model: doc.model, nodes: doc.nodes.length, groups: works.length, largest, dagre_ms: Math.round(dagreMs), elk_ms: Math.round(elkMs), dagre_crossings: dagreX, elk_crossings: elkX }));
	}
}

void main();
