/**
 * What the extension and the graph view's page say to each other (VS Code's webview messages).
 * In the self-contained page (`graph-dap graph --out`) there is no extension: the same view runs
 * with its graph and overlays read from the page itself.
 */
import type { GraphDoc, Overlay } from './doc';

/** The debugger as the graph view shows it. */
export interface DebugView {
	/** The session's name; empty when there is none. */
	session: string;
	/** running: no current node; ended: the last stop's picture stays. */
	phase: 'stopped' | 'running' | 'ended' | 'none';
	/** The current node (the top frame's), or null. */
	current: string | null;
	/** Counts stops in the session; the view answers `drawn` with it. */
	stop: number;
	/** When the adapter's `stopped` event reached the extension (`Date.now()`: the view's clock is the same machine's). */
	stoppedAt?: number;
	/** The stop's reason (`breakpoint`, `step`, `exception`...) and its text (`NaN`, `Inf`). */
	reason: string;
	text: string;
	/** Where a NaN/Inf started, and the nodes after it whose computed outputs hold one. */
	origin: string[];
	spread: string[];
}

export interface Summary {
	name: string;
	text: string;
	available: boolean;
}

export type ToView =
	| { type: 'graph'; graph: GraphDoc; overlays: Overlay[] }
	| { type: 'overlay'; overlay: Overlay }
	| { type: 'debug'; debug: DebugView }
	| { type: 'breakpoints'; nodes: string[] }
	| { type: 'select'; node: string }
	| { type: 'summaries'; request: number; summaries: Summary[] }
	| { type: 'status'; text: string; error?: boolean };

export type FromView =
	| { type: 'ready' }
	| { type: 'select'; node: string }
	| { type: 'toggleBreakpoint'; node: string }
	| { type: 'runTo'; node: string }
	| { type: 'jumpTo'; node: string }
	| { type: 'viewTensor'; value: string }
	| { type: 'summaries'; request: number; names: string[] }
	| { type: 'export'; format: 'svg' | 'png'; data: string }
	| { type: 'openOverlay' }
	/** The stop's highlight is drawn: `ms` after the `stopped` event reached the extension, `view` ms of them in the view. */
	| { type: 'drawn'; stop: number; ms: number; view: number };

/** What the view may ask of where it runs: the extension, or nothing (the page). */
export interface Host {
	/** Whether a debugger is behind the view (run to here, breakpoints, summaries). */
	readonly live: boolean;
	post(m: FromView): void;
}
