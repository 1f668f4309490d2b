/**
 * Where everything is drawn: a layered layout (dagre, chosen by measuring against elkjs: see
 * benchmarks/RESULTS.md) of each open group's children on its own, groups nested as boxes of the
 * size of their own layout. Opening a module lays out that module and re-places its ancestors'
 * children; every other group's layout is reused from the cache, so a module opens in time that
 * grows with its own size, not the model's. No DOM here: it is unit-tested in Node.
 */
import { graphlib, layout as dagreLayout } from '@dagrejs/dagre';
import { GraphModel, Item, Kind } from './model';

export interface Box {
	readonly item: number;
	x: number;
	y: number;
	readonly w: number;
	readonly h: number;
	/** An open group: its children are drawn inside it. */
	readonly open: boolean;
}

/** A drawn edge: from one shown item to another, the values it carries, its polyline (x, y pairs). */
export interface SceneEdge {
	readonly from: number;
	readonly to: number;
	readonly values: number[];
	readonly points: number[];
}

export interface Scene {
	/** Every shown item, parents before children. */
	readonly boxes: Box[];
	readonly box: Map<number, Box>;
	readonly edges: SceneEdge[];
	/** item -> the shown item that stands for it (itself, or its outermost closed ancestor). */
	readonly shownAs: Int32Array;
	readonly width: number;
	readonly height: number;
}

export const NODE_H = 36;
const IO_H = 24;
const MODULE_H = 42;
const HEADER = 24;
const PAD = 12;
const CHAR = 7;
const MAX_FANOUT = 8;

/** The size of an item drawn closed (a node, a graph input or output, a closed group). */
export function closedSize(it: Item): { w: number; h: number } {
	switch (it.kind) {
		case Kind.Input:
		case Kind.Output:
			return { w: clamp(it.label.length * 6.5 + 24, 48, 200), h: IO_H };
		case Kind.Module:
			return { w: clamp(Math.max(it.label.length * CHAR, moduleDetail(it).length * 6) + 28, 80, 260), h: MODULE_H };
		default:
			return { w: clamp(Math.max(it.label.length * CHAR + 24, Math.min(it.key.length, 28) * 6 + 16), 56, 220), h: NODE_H };
	}
}

/** What a closed module shows under its name. */
export function moduleDetail(it: Item): string {
	return `${it.detail ? it.detail + ' · ' : ''}${it.nodes} node${it.nodes === 1 ? '' : 's'}`;
}

function clamp(v: number, lo: number, hi: number): number {
	return Math.min(hi, Math.max(lo, Math.round(v)));
}

interface GroupLayout {
	w: number;
	h: number;
	/** child item -> top-left, relative to the group's content origin. */
	pos: Map<number, { x: number; y: number }>;
	/** `from>to` (children) -> polyline, relative. */
	routes: Map<string, number[]>;
}

/** Lays out a set of boxes and edges between them: the engine behind each group (dagre). */
export type Engine = (nodes: { id: number; w: number; h: number }[], edges: [number, number][]) => GroupLayout;

export const dagreEngine: Engine = (nodes, edges) => {
	const g = new graphlib.Graph({ multigraph: false });
	g.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 30, edgesep: 8, marginx: 0, marginy: 0, ranker: (globalThis as { RANKER?: string }).RANKER ?? 'network-simplex' });
	g.setDefaultEdgeLabel(() => ({}));
	for (const n of nodes) g.setNode(String(n.id), { width: n.w, height: n.h });
	for (const [a, b] of edges) g.setEdge(String(a), String(b));
	dagreLayout(g);
	const pos = new Map<number, { x: number; y: number }>();
	let w = 0;
	let h = 0;
	for (const n of nodes) {
		const v = g.node(String(n.id)) as { x: number; y: number };
		const x = v.x - n.w / 2;
		const y = v.y - n.h / 2;
		pos.set(n.id, { x, y });
		w = Math.max(w, x + n.w);
		h = Math.max(h, y + n.h);
	}
	const routes = new Map<string, number[]>();
	for (const [a, b] of edges) {
		const e = g.edge(String(a), String(b)) as { points?: { x: number; y: number }[] } | undefined;
		if (e?.points) routes.set(`${a}>${b}`, e.points.flatMap((p) => [p.x, p.y]));
	}
	return { w, h, pos, routes };
};

/** Lays out the shown part of a model for a set of open groups; keeps each group's layout for the next time. */
export class Layouter {
	private readonly cache = new Map<number, { key: string; layout: GroupLayout }>();
	/** Groups laid out by the last {@link scene} call (not taken from the cache): for the benchmarks. */
	laidOut = 0;

	constructor(
		readonly model: GraphModel,
		private readonly engine: Engine = dagreEngine,
	) {}

	/** Whether an item shows its children (the root and bodies of open nodes always do). */
	isOpen(i: number, expanded: ReadonlySet<number>): boolean {
		const it = this.model.items[i];
		return it.kind === Kind.Scope || (it.expandable && expanded.has(i));
	}

	/** Every shown item's box and every shown edge, for the groups in `expanded` open. */
	scene(expanded: ReadonlySet<number>): Scene {
		this.laidOut = 0;
		const { items } = this.model;
		const shownAs = new Int32Array(items.length);
		const shownOpen = new Uint8Array(items.length);
		const walk = (i: number, shown: number): void => {
			// An item is shown as itself when its parent is shown and open, else as what stands for its parent.
			shownAs[i] = shown < 0 ? i : shown;
			const open = shown < 0 && this.isOpen(i, expanded);
			shownOpen[i] = open ? 1 : 0;
			for (const c of items[i].children) walk(c, open ? -1 : shownAs[i]);
		};
		walk(0, -1);
		// The edges between shown items, and for each open group the edges between its children.
		const groupEdges = new Map<number, Set<string>>();
		const sceneEdges = new Map<string, { from: number; to: number; values: number[]; group: number; a: number; b: number }>();
		for (const e of this.model.edges) {
			const a = shownAs[e.from];
			const b = shownAs[e.to];
			if (a === b) continue;
			const key = `${a}>${b}`;
			const known = sceneEdges.get(key);
			if (known) {
				if (known.values.length < 16 && !known.values.includes(e.value)) known.values.push(e.value);
				continue;
			}
			const lca = this.childrenUnderCommon(a, b);
			if (!lca) continue;
			const [group, ca, cb] = lca;
			let set = groupEdges.get(group);
			if (!set) groupEdges.set(group, (set = new Set()));
			set.add(`${ca}>${cb}`);
			sceneEdges.set(key, { from: a, to: b, values: [e.value], group, a: ca, b: cb });
		}
		const layouts = new Map<number, GroupLayout>();
		const sizes = new Map<number, { w: number; h: number }>();
		const size = (i: number): { w: number; h: number } => {
			let s = sizes.get(i);
			if (s) return s;
			if (!shownOpen[i]) {
				s = closedSize(items[i]);
			} else {
				const l = this.layoutGroup(i, size, groupEdges.get(i), layouts);
				const pad = this.padding(i);
				s = { w: Math.max(l.w + 2 * pad.side, pad.minW), h: l.h + pad.top + pad.side };
			}
			sizes.set(i, s);
			return s;
		};
		const rootSize = size(0);
		const boxes: Box[] = [];
		const box = new Map<number, Box>();
		const place = (i: number, x: number, y: number, w: number, h: number): void => {
			const b: Box = { item: i, x, y, w, h, open: shownOpen[i] === 1 };
			boxes.push(b);
			box.set(i, b);
			if (!b.open) return;
			const l = layouts.get(i)!;
			const pad = this.padding(i);
			const ox = x + pad.side + Math.max(0, (w - 2 * pad.side - l.w) / 2);
			const oy = y + pad.top;
			for (const c of items[i].children) {
				const p = l.pos.get(c)!;
				const s = size(c);
				place(c, ox + p.x, oy + p.y, s.w, s.h);
			}
		};
		place(0, 0, 0, rootSize.w, rootSize.h);
		const edges: SceneEdge[] = [];
		for (const e of sceneEdges.values()) {
			const from = box.get(e.from)!;
			const to = box.get(e.to)!;
			let points: number[] | undefined;
			if (e.a === e.from && e.b === e.to) {
				const route = layouts.get(e.group)!.routes.get(`${e.a}>${e.b}`);
				const g = box.get(e.group)!;
				if (route) {
					const l = layouts.get(e.group)!;
					const pad = this.padding(e.group);
					const ox = g.x + pad.side + Math.max(0, (g.w - 2 * pad.side - l.w) / 2);
					const oy = g.y + pad.top;
					points = route.map((v, k) => (k % 2 ? v + oy : v + ox));
				}
			}
			edges.push({ from: e.from, to: e.to, values: e.values, points: points ?? curve(from, to) });
		}
		return { boxes, box, edges, shownAs, width: rootSize.w, height: rootSize.h };
	}

	private padding(i: number): { top: number; side: number; minW: number } {
		const it = this.model.items[i];
		if (i === 0) return { top: PAD, side: PAD, minW: 0 };
		if (it.kind === Kind.Scope) return { top: HEADER - 4, side: PAD / 2, minW: it.label.length * 7 + 24 };
		return { top: HEADER + 4, side: PAD, minW: closedSize(it).w };
	}

	/** `[group, child of it that holds a, child of it that holds b]`, the group the lowest one holding both. */
	private childrenUnderCommon(a: number, b: number): [number, number, number] | undefined {
		const { items } = this.model;
		let x = a;
		let y = b;
		let px = -1;
		let py = -1;
		while (items[x].depth > items[y].depth) {
			px = x;
			x = items[x].parent;
		}
		while (items[y].depth > items[x].depth) {
			py = y;
			y = items[y].parent;
		}
		while (x !== y) {
			px = x;
			py = y;
			x = items[x].parent;
			y = items[y].parent;
		}
		// One holds the other (a body's input read by a node in it): no edge between siblings.
		if (px < 0 || py < 0) return undefined;
		return [x, px, py];
	}

	private layoutGroup(
		i: number,
		size: (i: number) => { w: number; h: number },
		edges: Set<string> | undefined,
		layouts: Map<number, GroupLayout>,
	): GroupLayout {
		const children = this.model.items[i].children;
		const nodes = children.map((c) => ({ id: c, ...size(c) }));
		// A value read by many children (an attention mask read by every layer) is left out of the
		// layout (still drawn): its long edges would make the layered layout slow and no clearer.
		const fanout = new Map<string, number>();
		for (const e of edges ?? []) {
			const from = e.slice(0, e.indexOf('>'));
			fanout.set(from, (fanout.get(from) ?? 0) + 1);
		}
		const pairs = [...(edges ?? [])].filter((e) => (fanout.get(e.slice(0, e.indexOf('>'))) ?? 0) <= MAX_FANOUT).sort();
		const key = nodes.map((n) => `${n.id}:${n.w}x${n.h}`).join(',') + '|' + pairs.join(',');
		const cached = this.cache.get(i);
		let layout: GroupLayout;
		if (cached && cached.key === key) {
			layout = cached.layout;
		} else {
			this.laidOut++;
			layout = this.engine(
				nodes,
				pairs.map((p) => p.split('>').map(Number) as [number, number]),
			);
			this.cache.set(i, { key, layout });
		}
		layouts.set(i, layout);
		return layout;
	}
}

/** An edge between items of different groups: down from the bottom of one to the top of the other. */
function curve(a: Box, b: Box): number[] {
	const x1 = a.x + a.w / 2;
	const y1 = a.y + a.h;
	const x2 = b.x + b.w / 2;
	const y2 = b.y;
	const dy = Math.max(20, Math.abs(y2 - y1) / 3);
	return [x1, y1, x1, y1 + dy, x2, y2 - dy, x2, y2];
}
