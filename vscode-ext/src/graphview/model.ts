/**
 * The graph view's items: the tree of what can be drawn (nodes, graph inputs and outputs, module
 * scopes, the bodies of If/Loop/Scan nodes and function calls) and the value edges between them,
 * built once from a {@link GraphDoc}. No DOM here: it is unit-tested in Node.
 */
import { GraphDoc, NODE_ENTERABLE, NODE_CONSTANT, VALUE_INITIALIZER } from './doc';

export const enum Kind {
	/** A graph's own level: the main graph (the root) or a body; always open when shown. */
	Scope = 0,
	/** A module scope (`encoder.layer.0`): collapsed by default, a box with its node count. */
	Module = 1,
	/** A node; one that holds bodies (If, Loop, Scan, a function call) opens to show them. */
	Node = 2,
	/** A graph input (of the main graph or a body). */
	Input = 3,
	/** A graph output. */
	Output = 4,
}

/** A group of more children than this is split into chunks of at most CHUNK_SIZE. */
export const CHUNK_OVER = 150;
export const CHUNK_SIZE = 100;

export interface Item {
	readonly index: number;
	readonly kind: Kind;
	/** A run of a big group's children in run order (`nodes 101–200`), made so that no layout is too big. */
	readonly chunk: boolean;
	/** Unique among items: a node's id, `module:<scope>:<path>`, `scope:<n>`, `in:<scope>:<value>`, `out:<scope>:<value>`. */
	readonly key: string;
	readonly label: string;
	/** Under the label: a module's class and node count, a node's output type. */
	readonly detail: string;
	parent: number;
	children: number[];
	depth: number;
	/** For Node items: the row in `doc.nodes`; for Input/Output: the value; else -1. */
	readonly row: number;
	/** Nodes in its subtree (1 for a node without bodies). */
	nodes: number;
	/** Whether it can be opened and closed (modules, nodes with bodies). */
	readonly expandable: boolean;
}

/** A value from the item that computes it (or the graph input) to an item that reads it. */
export interface Edge {
	readonly from: number;
	readonly to: number;
	readonly value: number;
}

export class GraphModel {
	readonly items: Item[] = [];
	readonly edges: Edge[] = [];
	/** Node row -> its item. */
	readonly nodeItem: number[];
	/** Node id -> node row. */
	readonly nodeRow = new Map<string, number>();
	/** Listing line -> node row. */
	readonly lineRow = new Map<number, number>();
	/** Value -> the node rows that read it (for the spread of a NaN). */
	readonly readers: number[][];

	constructor(readonly doc: GraphDoc) {
		const { scopes, modules, nodes, values } = doc;
		this.nodeItem = new Array(nodes.length).fill(-1);
		this.readers = values.map(() => []);
		const scopeItem = new Array<number>(scopes.length).fill(-1);
		const moduleItem = new Array<number>(modules.length).fill(-1);
		// A module whose subtree holds one node is no group: its node stands in its parent.
		const moduleCount = new Array<number>(modules.length).fill(0);
		for (const n of nodes) {
			for (let m = n[3]; m >= 0; m = modules[m][2]) moduleCount[m]++;
		}
		const add = (kind: Kind, key: string, label: string, detail: string, parent: number, row: number, expandable: boolean): number => {
			const index = this.items.length;
			const depth = parent >= 0 ? this.items[parent].depth + 1 : 0;
			this.items.push({ index, kind, chunk: false, key, label, detail, parent, children: [], depth, row, nodes: 0, expandable });
			if (parent >= 0) this.items[parent].children.push(index);
			return index;
		};
		const scopeOf = (s: number): number => {
			if (scopeItem[s] < 0) {
				const [owner, attribute] = scopes[s];
				const parent = owner < 0 ? -1 : this.nodeItem[owner];
				scopeItem[s] = add(Kind.Scope, `scope:${s}`, owner < 0 ? doc.model : attribute, '', parent, -1, false);
				for (const v of scopes[s][2]) {
					add(Kind.Input, `in:${s}:${v}`, values[v][0], values[v][1], scopeItem[s], v, false);
				}
			}
			return scopeItem[s];
		};
		const moduleOf = (m: number): number => {
			const up = modules[m][2];
			if (moduleCount[m] < 2) return up >= 0 ? moduleOf(up) : scopeOf(modules[m][3]);
			if (moduleItem[m] < 0) {
				const [path, cls, parent, scope] = modules[m];
				const container = parent >= 0 ? moduleOf(parent) : scopeOf(scope);
				const prefix = parent >= 0 ? modules[parent][0] : '';
				const label = prefix && path.startsWith(prefix) ? path.slice(prefix.length).replace(/^[./]/, '') : path;
				const short = cls ? cls.slice(cls.lastIndexOf('.') + 1) : '';
				moduleItem[m] = add(Kind.Module, `module:${scope}:${path}`, label || path, short, container, -1, true);
			}
			return moduleItem[m];
		};
		scopeOf(0);
		// Nodes come in the document's order: each node before the nodes of its bodies.
		nodes.forEach((n, row) => {
			const [id, op, scope, module, line, , outputs, flags] = n;
			const container = module >= 0 ? moduleOf(module) : scopeOf(scope);
			const type = outputs.length ? values[outputs[0]][1] : '';
			const item = add(Kind.Node, id, op, type, container, row, (flags & NODE_ENTERABLE) !== 0);
			this.nodeItem[row] = item;
			this.nodeRow.set(id, row);
			if (line > 0) this.lineRow.set(line, row);
		});
		// Bodies: their items were made when their first node was met; make empty ones too.
		scopes.forEach((_, s) => scopeOf(s));
		scopes.forEach((scope, s) => {
			for (const v of scope[3]) add(Kind.Output, `out:${s}:${v}`, values[v][0], values[v][1], scopeItem[s], v, false);
		});
		// A node that holds bodies but no node in them (an empty branch) still opens to show its inputs.
		for (const it of this.items) {
			if (it.kind === Kind.Node && it.children.length === 0 && it.expandable) {
				(it as { expandable: boolean }).expandable = false;
			}
		}
		for (const it of [...this.items]) {
			if (it.kind === Kind.Scope || it.kind === Kind.Module) this.chunk(it);
		}
		this.setDepth(0, 0);
		this.countNodes(0);
		this.buildEdges();
	}

	/**
	 * Splits a group of more than {@link CHUNK_OVER} children (a model without module scopes, a module of
	 * 200 layers) into runs of at most {@link CHUNK_SIZE} in run order, each a group of its own.
	 */
	private chunk(group: Item): void {
		const middle = group.children.filter((c) => this.items[c].kind !== Kind.Input && this.items[c].kind !== Kind.Output);
		if (middle.length <= CHUNK_OVER) return;
		const runs = Math.ceil(middle.length / CHUNK_SIZE);
		const size = Math.ceil(middle.length / runs);
		const chunks: number[] = [];
		for (let k = 0; k < middle.length; k += size) {
			const part = middle.slice(k, k + size);
			const index = this.items.length;
			const first = this.items[part[0]];
			const last = this.items[part[part.length - 1]];
			const what = first.kind === Kind.Module ? `${first.label} … ${last.label}` : `nodes ${k + 1}–${k + part.length}`;
			this.items.push({ index, kind: Kind.Module, chunk: true, key: `chunk:${group.key}:${k}`, label: what, detail: '', parent: group.index, children: part, depth: 0, row: -1, nodes: 0, expandable: true });
			for (const c of part) this.items[c].parent = index;
			chunks.push(index);
		}
		const inputs = group.children.filter((c) => this.items[c].kind === Kind.Input);
		const outputs = group.children.filter((c) => this.items[c].kind === Kind.Output);
		group.children = [...inputs, ...chunks, ...outputs];
		for (const c of chunks) this.chunk(this.items[c]);
	}

	private setDepth(i: number, depth: number): void {
		const it = this.items[i];
		it.depth = depth;
		for (const c of it.children) this.setDepth(c, depth + 1);
	}

	get root(): Item {
		return this.items[0];
	}

	private countNodes(i: number): number {
		const it = this.items[i];
		let n = it.kind === Kind.Node ? 1 : 0;
		for (const c of it.children) n += this.countNodes(c);
		it.nodes = n;
		return n;
	}

	private buildEdges(): void {
		const { nodes, values } = this.doc;
		const inputItem = new Map<number, number>();
		const outputItems: [number, number][] = [];
		for (const it of this.items) {
			if (it.kind === Kind.Input) inputItem.set(it.row, it.index);
			else if (it.kind === Kind.Output) outputItems.push([it.row, it.index]);
		}
		const source = (v: number): number => {
			const producer = values[v][2];
			if (producer >= 0) return this.nodeItem[producer];
			return inputItem.get(v) ?? -1;
		};
		nodes.forEach((n, row) => {
			for (const v of n[5]) {
				this.readers[v].push(row);
				if (values[v][3] & VALUE_INITIALIZER) continue;
				const from = source(v);
				if (from >= 0) this.edges.push({ from, to: this.nodeItem[row], value: v });
			}
		});
		for (const [v, item] of outputItems) {
			const from = source(v);
			if (from >= 0 && from !== item) this.edges.push({ from, to: item, value: v });
		}
	}

	/** The items from the root down to `i`, both included. */
	ancestors(i: number): number[] {
		const out: number[] = [];
		for (let k = i; k >= 0; k = this.items[k].parent) out.push(k);
		return out.reverse();
	}

	/** The item of the node with this id, or -1. */
	itemOfNode(id: string): number {
		const row = this.nodeRow.get(id);
		return row === undefined ? -1 : this.nodeItem[row];
	}

	/** A node's listing line, written again from the document's columns (`y: float32[1,8] = Conv<pads=[1,1]>(x, w)  # model.py:3`). */
	lineText(row: number): string {
		const [, op, , , , inputs, outputs, , extra] = this.doc.nodes[row];
		const cut = extra.indexOf('  # ');
		const attrs = cut >= 0 ? extra.slice(0, cut) : extra;
		const source = cut >= 0 ? extra.slice(cut) : '';
		const values = this.doc.values;
		const outs = outputs.map((v) => `${values[v][0]}: ${values[v][1]}`).join(', ');
		return `${outs} = ${op}${attrs}(${inputs.map((v) => values[v][0]).join(', ')})${source}`;
	}

	/** Whether a node is computed from constants alone: drawn as a constant. */
	isConstant(row: number): boolean {
		return (this.doc.nodes[row][7] & NODE_CONSTANT) !== 0;
	}

	/** The nodes that depend on node `row` (directly or not), itself excluded: where a NaN from it can spread. */
	downstream(row: number): number[] {
		const seen = new Set<number>([row]);
		const stack = [row];
		const { nodes } = this.doc;
		while (stack.length) {
			const r = stack.pop()!;
			const outs = nodes[r][6];
			for (const v of outs) {
				for (const reader of this.readers[v]) {
					if (!seen.has(reader)) {
						seen.add(reader);
						stack.push(reader);
					}
				}
			}
			// A value computed inside a body reaches on through the node that holds the body.
			const owner = this.ownerRow(r);
			if (owner >= 0 && !seen.has(owner)) {
				seen.add(owner);
				stack.push(owner);
			}
		}
		seen.delete(row);
		return [...seen].sort((a, b) => a - b);
	}

	/** The row of the node that holds node `row`'s body, or -1 in the main graph. */
	ownerRow(row: number): number {
		return this.doc.scopes[this.doc.nodes[row][2]][0];
	}

	/** Node rows whose id, op or values match `query` (case-insensitive), best first, at most `limit`. */
	search(query: string, limit = 50): { row: number; why: string }[] {
		const q = query.trim().toLowerCase();
		if (!q) return [];
		const exact: { row: number; why: string }[] = [];
		const rest: { row: number; why: string }[] = [];
		const { nodes, values } = this.doc;
		for (let row = 0; row < nodes.length && exact.length < limit; row++) {
			const [id, op, , , , inputs, outputs] = nodes[row];
			const lid = id.toLowerCase();
			if (lid === q) {
				exact.push({ row, why: 'node' });
				continue;
			}
			if (rest.length >= limit) continue;
			if (lid.includes(q)) rest.push({ row, why: 'node' });
			else if (op.toLowerCase() === q) rest.push({ row, why: 'op' });
			else {
				const v = outputs.find((k) => values[k][0].toLowerCase().includes(q)) ?? inputs.find((k) => values[k][0].toLowerCase().includes(q));
				if (v !== undefined) rest.push({ row, why: `value ${values[v][0]}` });
			}
		}
		return [...exact, ...rest].slice(0, limit);
	}
}
