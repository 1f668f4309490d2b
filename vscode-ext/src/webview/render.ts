/**
 * Pure drawing logic of the tensor viewer: decoding cells, colours, the slice's label and the
 * histogram's bars. No DOM here, so it is unit-tested.
 */
import type { Cell } from '../tensorProtocol';

export type RGB = readonly [number, number, number];

/** Colours of the cells that have no place on the scale. */
export const NAN_COLOR: RGB = [255, 0, 255];
export const POSINF_COLOR: RGB = [255, 0, 0];
export const NEGINF_COLOR: RGB = [255, 255, 255];

export type CellKind = 'finite' | 'nan' | 'posinf' | 'neginf';

/** A cell as a number: "nan" -> NaN, "inf" -> Infinity, "-inf" -> -Infinity; null -> NaN. */
export function decodeCell(c: Cell | string | undefined): number {
	if (typeof c === 'number') {
		return c;
	}
	switch (c) {
		case 'inf':
		case '+inf':
		case 'Infinity':
			return Infinity;
		case '-inf':
		case '-Infinity':
			return -Infinity;
		default:
			return NaN;
	}
}

export function classify(v: number): CellKind {
	if (Number.isNaN(v)) {
		return 'nan';
	}
	if (v === Infinity) {
		return 'posinf';
	}
	if (v === -Infinity) {
		return 'neginf';
	}
	return 'finite';
}

// viridis, sampled at 9 points; linear interpolation in between.
const VIRIDIS: RGB[] = [
	[68, 1, 84],
	[71, 44, 122],
	[59, 81, 139],
	[44, 113, 142],
	[33, 144, 141],
	[39, 173, 129],
	[92, 200, 99],
	[170, 220, 50],
	[253, 231, 37],
];

// A diverging scale (ColorBrewer's RdBu, reversed): blue below the centre, white at it, red above.
const DIVERGING: RGB[] = [
	[5, 48, 97],
	[33, 102, 172],
	[67, 147, 195],
	[146, 197, 222],
	[247, 247, 247],
	[244, 165, 130],
	[214, 96, 77],
	[178, 24, 43],
	[103, 0, 31],
];

/** How a slice is coloured: `sequential` from its min to its max, `diverging` centred on 0 (an error). */
export type ColorMap = 'sequential' | 'diverging';

/** The colour of t in [0, 1] on the scale (clamped). */
export function colormap(t: number, map: ColorMap = 'sequential'): RGB {
	return interpolate(map === 'diverging' ? DIVERGING : VIRIDIS, Number.isFinite(t) ? t : 0);
}

/** The ends of the scale: the finite range, or for a diverging map the range made symmetric about 0 (0 is white). */
export function scaleRange(lo: number, hi: number, map: ColorMap = 'sequential'): { lo: number; hi: number } {
	if (map !== 'diverging') {
		return { lo, hi };
	}
	const m = Math.max(Math.abs(lo), Math.abs(hi));
	return { lo: -m, hi: m };
}

/** The colour at t in [0, 1] (clamped) of a scale sampled at evenly spaced `stops`, linear in between. */
export function interpolate(stops: readonly RGB[], t: number): RGB {
	const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
	const i = Math.min(stops.length - 2, Math.floor(x));
	const f = x - i;
	const a = stops[i];
	const b = stops[i + 1];
	return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}

/** The colour of value v on a scale from lo to hi; NaN and Inf in their own colours. */
export function cellColor(v: number, lo: number, hi: number, map: ColorMap = 'sequential'): RGB {
	switch (classify(v)) {
		case 'nan':
			return NAN_COLOR;
		case 'posinf':
			return POSINF_COLOR;
		case 'neginf':
			return NEGINF_COLOR;
		default:
			return colormap(hi > lo ? (v - lo) / (hi - lo) : 0.5, map);
	}
}

/** The slice's values as numbers, rows of equal length (0-D and 1-D become one row). */
export function toMatrix(data: unknown): number[][] {
	if (!Array.isArray(data)) {
		return [[decodeCell(data as Cell)]];
	}
	if (data.length === 0) {
		return [];
	}
	if (!Array.isArray(data[0])) {
		return [data.map((c) => decodeCell(c as Cell))];
	}
	return (data as Cell[][]).map((row) => row.map(decodeCell));
}

/** The finite range of a matrix, and its counts of NaN and Inf. */
export function finiteRange(m: number[][]): { lo: number; hi: number; nan: number; posinf: number; neginf: number } {
	let lo = Infinity;
	let hi = -Infinity;
	let nan = 0;
	let posinf = 0;
	let neginf = 0;
	for (const row of m) {
		for (const v of row) {
			const k = classify(v);
			if (k === 'finite') {
				if (v < lo) lo = v;
				if (v > hi) hi = v;
			} else if (k === 'nan') nan++;
			else if (k === 'posinf') posinf++;
			else neginf++;
		}
	}
	if (lo > hi) {
		lo = 0;
		hi = 0;
	}
	return { lo, hi, nan, posinf, neginf };
}

/** RGBA pixels, one per cell, row-major, for a canvas ImageData. */
export function heatmapPixels(
	m: number[][],
	lo: number,
	hi: number,
	map: ColorMap = 'sequential',
): { width: number; height: number; pixels: Uint8ClampedArray<ArrayBuffer> } {
	const height = m.length;
	const width = height ? Math.max(...m.map((r) => r.length)) : 0;
	const pixels = new Uint8ClampedArray(width * height * 4);
	for (let r = 0; r < height; r++) {
		for (let c = 0; c < width; c++) {
			const v = c < m[r].length ? m[r][c] : NaN;
			const [R, G, B] = cellColor(v, lo, hi, map);
			const o = (r * width + c) * 4;
			pixels[o] = R;
			pixels[o + 1] = G;
			pixels[o + 2] = B;
			pixels[o + 3] = 255;
		}
	}
	return { width, height, pixels };
}

/** The slice in index notation, e.g. `[0, 3, :, :]` (`::2` where downsampled). */
export function sliceLabel(shape: number[], index: number[], stride: number[]): string {
	const lead = index.map(String);
	const rest = shape.slice(index.length).map((_, i) => ((stride[i] ?? 1) > 1 ? `::${stride[i]}` : ':'));
	return `[${[...lead, ...rest].join(', ')}]`;
}

/** The leading axes a user picks indices on: all but the last two. */
export function leadingAxes(shape: number[]): number[] {
	return shape.slice(0, Math.max(0, shape.length - 2));
}

/** The position in the full tensor of a cell of the downsampled slice. */
export function cellPosition(index: number[], stride: number[], row: number, col: number, sliceRank: number): number[] {
	if (sliceRank === 0) {
		return [...index];
	}
	if (sliceRank === 1) {
		return [...index, col * (stride[0] ?? 1)];
	}
	return [...index, row * (stride[0] ?? 1), col * (stride[1] ?? 1)];
}

export interface Bar {
	x: number;
	y: number;
	width: number;
	height: number;
	count: number;
}

/** Histogram bars in a width x height box (y grows downwards); log scale optional. */
export function histogramBars(counts: number[], width: number, height: number, log = false): Bar[] {
	if (counts.length === 0) {
		return [];
	}
	const f = (c: number) => (log ? Math.log10(1 + c) : c);
	const top = Math.max(...counts.map(f));
	const w = width / counts.length;
	return counts.map((count, i) => {
		const h = top > 0 ? (f(count) / top) * height : 0;
		return { x: i * w, y: height - h, width: Math.max(1, w - (w > 3 ? 1 : 0)), height: h, count };
	});
}

/** A short, readable number: integers as they are, others with 4 significant digits. */
export function formatNumber(v: number | string | null | undefined): string {
	if (v === null || v === undefined) {
		return '-';
	}
	const n = typeof v === 'number' ? v : decodeCell(v);
	if (Number.isNaN(n)) return 'NaN';
	if (n === Infinity) return '+Inf';
	if (n === -Infinity) return '-Inf';
	if (Number.isInteger(n) && Math.abs(n) < 1e15) return String(n);
	const a = Math.abs(n);
	if (a !== 0 && (a < 1e-3 || a >= 1e6)) return n.toExponential(3);
	return String(Number(n.toPrecision(4)));
}
