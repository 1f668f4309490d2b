/**
 * The custom DAP request behind the tensor viewer (see PROTOCOL.md). Types only, shared by the
 * extension and the webview.
 */

export const TENSOR_VIEW_REQUEST = 'graphDap/tensorView';

export interface TensorViewArguments {
	/** The value's name (or, for a child variable, its evaluateName). */
	name: string;
	/** Leading indices that select the 2-D slice (one per axis before the last two). */
	index?: number[];
	/** Most cells per side of the slice; the adapter downsamples above it. */
	maxSize?: number;
}

/** A cell: a number, or "nan", "inf", "-inf" (JSON has no NaN). */
export type Cell = number | 'nan' | 'inf' | '-inf' | null;

export interface TensorViewBody {
	name: string;
	dtype: string;
	shape: number[];
	/** Shape of the slice before downsampling (the last two axes, or fewer for 0-D and 1-D). */
	sliceShape: number[];
	/** The leading indices actually used (clamped, filled with zeros). */
	index: number[];
	/** Downsampling step per axis of the slice (1 = every cell). */
	stride: number[];
	/** The (downsampled) slice, as rows. */
	data: Cell[][];
	min: Cell;
	max: Cell;
	mean: Cell;
	nan: number;
	posinf: number;
	neginf: number;
	histogram: { edges: number[]; counts: number[] };
	/** "diverging": draw centred on 0, blue below and red above (a quantized tensor's error); absent: min to max. */
	colorMap?: 'diverging';
}

/** Messages from the extension to the webview. */
export type ToWebview =
	| { type: 'data'; body: TensorViewBody; session: string }
	| { type: 'error'; message: string }
	| { type: 'status'; text: string };

/** Messages from the webview to the extension. */
export type FromWebview = { type: 'ready' } | { type: 'setIndex'; index: number[] } | { type: 'refresh' };
