/**
 * Per-node numbers as colour: an overlay's metric on a scale from best to worst, with its legend;
 * a closed group takes the worst of the nodes inside it. And the colours of the debugger's state
 * (where a NaN started, where it spread). No DOM here: it is unit-tested in Node.
 */
import { RGB, interpolate } from '../webview/render';
import { Overlay, OverlayMetric } from './doc';
import { GraphModel, Kind } from './model';

export type { RGB };

/** Where a NaN/Inf started, and the nodes after it whose outputs hold one too. */
export const ORIGIN_COLOR: RGB = [220, 38, 38];
export const SPREAD_COLOR: RGB = [249, 115, 22];
/** A node that marks the overlay (compare's first divergence, scan's first bad node): its outline. */
export const MARK_COLOR: RGB = [217, 70, 239];

// From good (cool, pale) to bad (hot): a sequential scale readable on dark and light themes.
const SCALE: RGB[] = [
	[49, 130, 189],
	[107, 174, 214],
	[161, 217, 155],
	[254, 224, 139],
	[253, 141, 60],
	[215, 48, 31],
];

/** The colour of t in [0, 1] (0 best, 1 worst); NaN is worst. */
export function scaleColor(t: number): RGB {
	return interpolate(SCALE, Number.isFinite(t) ? t : 1);
}

/** An overlay's value as a number: `"inf"` -> Infinity, `"-inf"`, `"nan"`; null/undefined stay null. */
export function numeric(v: number | string | null | undefined): number | null {
	if (v === null || v === undefined) return null;
	if (typeof v === 'number') return v;
	if (v === 'inf' || v === '+inf' || v === 'Infinity') return Infinity;
	if (v === '-inf' || v === '-Infinity') return -Infinity;
	if (v === 'nan' || v === 'NaN') return NaN;
	const n = Number(v);
	return Number.isNaN(n) ? null : n;
}

/** The range of a metric over the nodes that have it (finite values only), and its legend's ends. */
export interface Scale {
	readonly metric: OverlayMetric;
	readonly lo: number;
	readonly hi: number;
	readonly log: boolean;
	/** Nodes with a value. */
	readonly count: number;
}

export function metricScale(overlay: Overlay, key: string): Scale {
	const metric = overlay.metrics.find((m) => m.key === key) ?? overlay.metrics[0];
	let lo = Infinity;
	let hi = -Infinity;
	let count = 0;
	const log = !!metric.log;
	for (const values of Object.values(overlay.values)) {
		const v = numeric(values[metric.key]);
		if (v === null) continue;
		count++;
		if (!Number.isFinite(v) || (log && v <= 0)) continue;
		lo = Math.min(lo, v);
		hi = Math.max(hi, v);
	}
	if (lo > hi) {
		lo = 0;
		hi = 0;
	}
	return { metric, lo, hi, log, count };
}

/**
 * Where v stands on the scale, 0 (best) to 1 (worst). Beyond the finite range: +Inf is the top
 * and -Inf the bottom of the numbers (SQNR "inf" means identical: best when lower is worse); NaN is worst.
 */
export function position(scale: Scale, v: number): number {
	if (Number.isNaN(v)) return 1;
	let t: number;
	if (v === Infinity) t = 1;
	else if (v === -Infinity) t = 0;
	else if (scale.hi <= scale.lo) t = 0.5;
	else if (scale.log) {
		const x = Math.log10(Math.max(v, scale.lo));
		t = (x - Math.log10(scale.lo)) / (Math.log10(scale.hi) - Math.log10(scale.lo));
	} else t = (v - scale.lo) / (scale.hi - scale.lo);
	t = Math.min(1, Math.max(0, t));
	return scale.metric.worse === 'high' ? t : 1 - t;
}

/** The colour of a node's value, or undefined when the overlay has none for it. */
export function valueColor(scale: Scale, v: number | string | null | undefined): RGB | undefined {
	const n = numeric(v);
	return n === null ? undefined : scaleColor(position(scale, n));
}

/**
 * Each item's colour under an overlay's metric: a node's own value; a group's, the worst value of the
 * nodes inside it (a closed module shows where the trouble is). Items without a value: undefined.
 */
export function itemColors(model: GraphModel, overlay: Overlay, scale: Scale): (RGB | undefined)[] {
	const worst = new Array<number | undefined>(model.items.length);
	const key = scale.metric.key;
	for (const [id, values] of Object.entries(overlay.values)) {
		const item = model.itemOfNode(id);
		const v = numeric(values[key]);
		if (item < 0 || v === null) continue;
		const t = position(scale, v);
		for (let k = item; k >= 0; k = model.items[k].parent) {
			const known = worst[k];
			if (known !== undefined && known >= t) break;
			worst[k] = t;
		}
	}
	return worst.map((t, i) => (t === undefined || model.items[i].kind === Kind.Scope ? undefined : scaleColor(t)));
}

/** Legend ticks: the metric's label, and the numbers at the best and the worst end. */
export function legendText(scale: Scale, format: (v: number) => string): { label: string; best: string; worst: string } {
	const { metric, lo, hi } = scale;
	const best = metric.worse === 'high' ? lo : hi;
	const worst = metric.worse === 'high' ? hi : lo;
	return { label: metric.label + (scale.log ? ' (log scale)' : ''), best: format(best), worst: format(worst) };
}

/** The nodes whose overlay mark (and the groups that hold one) are drawn outlined. */
export function markedItems(model: GraphModel, overlay: Overlay): Set<number> {
	const out = new Set<number>();
	for (const id of Object.keys(overlay.marks)) {
		for (let k = model.itemOfNode(id); k >= 0; k = model.items[k].parent) out.add(k);
	}
	return out;
}

/** The NaN/Inf state at a stop: `origin` nodes and `spread` nodes as ids, each group marked by the worst inside it. */
export function nonFiniteItems(model: GraphModel, origin: Iterable<string>, spread: Iterable<string>): Map<number, 'origin' | 'spread'> {
	const out = new Map<number, 'origin' | 'spread'>();
	const mark = (id: string, what: 'origin' | 'spread') => {
		for (let k = model.itemOfNode(id); k > 0; k = model.items[k].parent) {
			const known = out.get(k);
			if (known === 'origin' || known === what) break;
			out.set(k, what);
		}
	};
	for (const id of origin) mark(id, 'origin');
	for (const id of spread) mark(id, 'spread');
	return out;
}
