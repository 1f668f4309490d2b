/**
 * The graph view's input: the document `graph-dap graph MODEL --json` prints (Python:
 * graph_dap/runtime/tools/graphview/data.py, whose docstring defines the rows), and the overlays
 * made from the tools' JSON (overlays.py there).
 */

/** `[owner node, attribute, input values, output values]`; the main graph first, owner -1. */
export type ScopeRow = [number, string, number[], number[]];
/** `[path, class, parent module, scope]`. */
export type ModuleRow = [string, string, number, number];
/** `[name, type, producer node, flags]` (flags: 1 initializer). */
export type ValueRow = [string, string, number, number];
/** `[id, op, scope, module, line, input values, output values, flags, listing text]` (flags: 1 constant: computed from constants alone, 2 enterable). */
export type NodeRow = [string, string, number, number, number, number[], number[], number, string];

export interface GraphDoc {
	format: 'graph-dap-graph';
	version: number;
	model: string;
	path: string | null;
	scopes: ScopeRow[];
	modules: ModuleRow[];
	values: ValueRow[];
	nodes: NodeRow[];
}

export const VALUE_INITIALIZER = 1;
export const NODE_CONSTANT = 1;
export const NODE_ENTERABLE = 2;

/** One number an overlay gives per node: how it is named, and which way is worse. */
export interface OverlayMetric {
	key: string;
	label: string;
	/** `high`: a larger number is worse (max_abs, time); `low`: a smaller one is (SQNR, cosine). */
	worse: 'high' | 'low';
	/** Colour on a log scale (values spread over decades: errors, times). */
	log?: boolean;
}

/** Per-node numbers from a tool's JSON (compare, profile, scan), and the nodes it marks. */
export interface Overlay {
	kind: 'compare' | 'profile' | 'scan';
	title: string;
	source: string;
	metrics: OverlayMetric[];
	/** node id -> metric key -> value (`"inf"`, `"-inf"`, `"nan"` as strings; null when missing). */
	values: Record<string, Record<string, number | string | null>>;
	/** node id -> what the tool says of it (`first divergence`, `first bad node of 3 inputs`). */
	marks: Record<string, string>;
	/** What a mark means, for the legend. */
	markLabel?: string;
}
