/**
 * Following the debugger on the graph, without VS Code's API (unit-tested): which node a frame's
 * listing line is, which values to look at after a NaN/Inf stop, and from their summaries where the
 * NaN started (a node whose outputs hold one while its inputs do not) and where it spread.
 */
import { VALUE_INITIALIZER } from './doc';
import { GraphModel } from './model';

/** The node on a listing line (1-based), or on the first node line below it; undefined past the last. */
export function nodeAtLine(model: GraphModel, line: number): string | undefined {
	const exact = model.lineRow.get(line);
	if (exact !== undefined) return model.doc.nodes[exact][0];
	let best: number | undefined;
	for (const l of model.lineRow.keys()) if (l >= line && (best === undefined || l < best)) best = l;
	return best === undefined ? undefined : model.doc.nodes[model.lineRow.get(best)!][0];
}

/** The nodes at breakpoint lines (only lines that are a node's: a breakpoint elsewhere is the adapter's to move). */
export function nodesAtLines(model: GraphModel, lines: Iterable<number>): string[] {
	const out: string[] = [];
	for (const line of lines) {
		const row = model.lineRow.get(line);
		if (row !== undefined) out.push(model.doc.nodes[row][0]);
	}
	return out;
}

/** Whether a summary (`float32[1,8] min=.. nan=3 inf=1`, `float32[] = nan`) says the value holds a NaN or an Inf. */
export function nonFinite(text: string): boolean {
	return /(^|\s)(nan|inf)=[1-9]/.test(text) || /= -?(nan|inf)$/.test(text.trim());
}

/** The nodes to look at after NaN/Inf stops at `stops`: those nodes and every node after them. */
export function watchedNodes(model: GraphModel, stops: Iterable<string>): number[] {
	const rows = new Set<number>();
	for (const id of stops) {
		const row = model.nodeRow.get(id);
		if (row === undefined || rows.has(row)) continue;
		rows.add(row);
		for (const r of model.downstream(row)) rows.add(r);
	}
	return [...rows].sort((a, b) => a - b);
}

/** The values whose summaries tell the spread: the watched nodes' outputs and inputs (initializers left out). */
export function watchedValues(model: GraphModel, rows: number[]): string[] {
	const { nodes, values } = model.doc;
	const names = new Set<string>();
	for (const r of rows) {
		for (const v of [...nodes[r][6], ...nodes[r][5]]) if (!(values[v][3] & VALUE_INITIALIZER)) names.add(values[v][0]);
	}
	return [...names];
}

/**
 * Where the NaN/Inf is, from the summaries of the watched values (name -> summary text; a value not
 * computed yet is missing): `origin` the nodes with a non-finite output and no non-finite input,
 * `spread` the other nodes with a non-finite output.
 */
export function spreadOf(model: GraphModel, rows: number[], summaries: Map<string, string>): { origin: string[]; spread: string[] } {
	const { nodes, values } = model.doc;
	const bad = (v: number) => {
		const text = summaries.get(values[v][0]);
		return text !== undefined && nonFinite(text);
	};
	const origin: string[] = [];
	const spread: string[] = [];
	for (const r of rows) {
		if (!nodes[r][6].some(bad)) continue;
		(nodes[r][5].some(bad) ? spread : origin).push(nodes[r][0]);
	}
	return { origin, spread };
}

/**
 * The node a NaN/Inf stop's description starts with (`head/step/sub (Sub) produced 70 NaN in ...`):
 * the longest text before a ` (` that is a node id of the model; undefined when none is.
 */
export function nodeFromDescription(model: GraphModel, description: string): string | undefined {
	let found: string | undefined;
	for (let i = description.indexOf(' ('); i > 0; i = description.indexOf(' (', i + 1)) {
		const id = description.slice(0, i);
		if (model.nodeRow.has(id)) found = id;
	}
	return found;
}
