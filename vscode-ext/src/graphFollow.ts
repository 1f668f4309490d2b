/**
 * The graph views follow graph-dap's debug sessions: a DebugAdapterTracker sees each `stopped`
 * event and the stack trace VS Code asks for next; the top frame's listing line is the current
 * node (shown at once when the event names it: a breakpoint's line, the node of a NaN/Inf stop), shown in the view of that listing's model (opened at the first stop when
 * `graphDap.graphView.openOnStop` is on). After a NaN/Inf stop, every stop asks the adapter for the
 * summaries of the values after it (`graphDap/summaries`) and colours where the NaN started and spread.
 */
import * as vscode from 'vscode';
import { DEBUG_TYPE, LISTING_EXT, modelPathFor } from './configuration';
import type { GraphPanel, GraphViews } from './graphView';
import { nodeFromDescription, spreadOf, watchedNodes, watchedValues } from './graphview/follow';
import type { DebugView } from './graphview/protocol';

/** Names in one graphDap/summaries request (the adapter takes at most 2000). */
const BATCH = 2000;
const RESUMING = new Set(['continue', 'next', 'stepIn', 'stepOut', 'stepBack', 'reverseContinue', 'goto', 'graphDap/runTo']);

type Message = { type?: string; event?: string; command?: string; success?: boolean; body?: Record<string, unknown> };
type Pending = { stop: number; t0: number; at: number; reason: string; text: string };

interface SessionState {
	stops: number;
	/** A stop waiting for its top frame. */
	pending?: Pending;
	/** A stop shown from what its event said, waiting for its top frame to confirm it. */
	confirm?: { pending: Pending; path: string; line: number };
	/** The node of the last `graphDap/runTo` request: the stop it ends with is there. */
	runTo?: string;
	/** Breakpoint id -> where the adapter put it. */
	breakpoints: Map<number, { path: string; line: number }>;
	panel?: GraphPanel;
	/** Nodes where the run stopped on NaN/Inf. */
	nanStops: string[];
	last: Omit<DebugView, 'current'>;
	line?: number;
}

export class GraphFollower implements vscode.DebugAdapterTrackerFactory {
	constructor(private readonly views: GraphViews) {}

	createDebugAdapterTracker(session: vscode.DebugSession): vscode.DebugAdapterTracker {
		const st: SessionState = { stops: 0, breakpoints: new Map(), nanStops: [], last: { session: session.name, phase: 'none', stop: 0, reason: '', text: '', origin: [], spread: [] } };
		const show = (patch: Partial<Omit<DebugView, 'current'>>) => {
			st.last = { ...st.last, ...patch };
			st.panel?.setDebug(session, st.last, st.line);
		};
		return {
			onDidSendMessage: (m: Message) => {
				if (m.type === 'response' && m.command === 'setBreakpoints' && m.success) {
					for (const b of (m.body?.breakpoints ?? []) as { id?: number; line?: number; source?: { path?: string } }[]) {
						if (b.id !== undefined && b.line !== undefined && b.source?.path) st.breakpoints.set(b.id, { path: b.source.path, line: b.line });
					}
				} else if (m.type === 'event' && m.event === 'stopped') {
					st.stops++;
					const pending = { stop: st.stops, t0: performance.now(), at: Date.now(), reason: String(m.body?.reason ?? ''), text: String(m.body?.text ?? '') };
					// The stop's node as the event names it (a breakpoint's line, a NaN's node), shown at once; the
					// top frame of the stack trace VS Code asks next confirms it (in a remote workbench, code-server,
					// that request first makes a round trip through the browser).
					const guess = this.fromEvent(session, st, m.body ?? {});
					st.pending = guess ? undefined : pending;
					st.confirm = guess ? { pending, ...guess } : undefined;
					if (guess) this.stopped(session, st, guess.path, guess.line, pending, show);
				} else if (m.type === 'response' && m.command === 'stackTrace' && m.success && (st.pending || st.confirm)) {
					const frames = (m.body?.stackFrames ?? []) as { line: number; source?: { path?: string } }[];
					const top = frames.find((f) => f.source?.path?.endsWith(LISTING_EXT));
					if (!top) return;
					const pending = st.pending ?? st.confirm!.pending;
					const guessed = st.confirm;
					st.pending = undefined;
					st.confirm = undefined;
					if (!guessed || guessed.path !== top.source!.path || guessed.line !== top.line) this.stopped(session, st, top.source!.path!, top.line, pending, show);
				} else if (m.type === 'event' && m.event === 'continued') {
					show({ phase: 'running' });
				} else if (m.type === 'event' && (m.event === 'terminated' || m.event === 'exited')) {
					show({ phase: 'ended' });
				}
			},
			onWillReceiveMessage: (m: { type?: string; command?: string; arguments?: { node?: string } }) => {
				if (m.type === 'request' && m.command && RESUMING.has(m.command)) show({ phase: 'running' });
				if (m.type === 'request' && m.command === 'graphDap/runTo') st.runTo = m.arguments?.node;
			},
			onExit: () => {
				show({ phase: 'ended' });
			},
		};
	}

	/** The listing line a `stopped` event names: a breakpoint's (hitBreakpointIds), the node run to, or the node a NaN/Inf stop's description starts with. */
	private fromEvent(session: vscode.DebugSession, st: SessionState, body: Record<string, unknown>): { path: string; line: number } | undefined {
		const runTo = st.runTo;
		st.runTo = undefined;
		const ids = (body.hitBreakpointIds as number[] | undefined) ?? [];
		const hit = ids.map((id) => st.breakpoints.get(id)).find((b) => b?.path.endsWith(LISTING_EXT));
		if (body.reason === 'breakpoint' && hit) return hit;
		const model = (session.configuration as { model?: string }).model;
		const panel = model ? this.views.panels.get(model) : undefined;
		if (!panel?.model) return undefined;
		// Run to Here ends as a breakpoint stop without breakpoint ids, at the node asked for.
		const reached = body.reason === 'breakpoint' && !ids.length && runTo !== undefined ? runTo : undefined;
		if (body.reason !== 'exception' && !reached) return undefined;
		const node = reached ?? (typeof body.description === 'string' ? nodeFromDescription(panel.model, body.description) : undefined);
		const line = node !== undefined ? panel.model.doc.nodes[panel.model.nodeRow.get(node)!][4] : 0;
		return line ? { path: panel.listing, line } : undefined;
	}

	private stopped(
		session: vscode.DebugSession,
		st: SessionState,
		listing: string,
		line: number,
		pending: Pending,
		show: (patch: Partial<Omit<DebugView, 'current'>>) => void,
	): void {
		let panel = this.views.byListing(listing);
		if (!panel && st.stops === 1 && vscode.workspace.getConfiguration('graphDap').get<boolean>('graphView.openOnStop', false)) {
			panel = this.views.show(modelPathFor(listing));
		}
		if (!panel) return;
		st.panel = panel;
		st.line = line;
		if (!panel.stopSeen.has(pending.stop)) panel.stopSeen.set(pending.stop, { t0: pending.t0, frames: performance.now() });
		show({ phase: 'stopped', stop: pending.stop, stoppedAt: pending.at, reason: pending.reason, text: pending.text });
		const current = panel.current;
		if (current && pending.reason === 'exception' && /^(NaN|Inf)$/.test(pending.text) && !st.nanStops.includes(current)) st.nanStops.push(current);
		if (st.nanStops.length && panel.model) void this.spread(session, st, panel, pending.stop, show);
	}

	/** Asks the summaries of the values after the NaN/Inf stops, and shows where the NaN started and spread. */
	private async spread(session: vscode.DebugSession, st: SessionState, panel: GraphPanel, stop: number, show: (patch: Partial<Omit<DebugView, 'current'>>) => void): Promise<void> {
		const model = panel.model!;
		const rows = watchedNodes(model, st.nanStops);
		const names = watchedValues(model, rows);
		const summaries = new Map<string, string>();
		try {
			for (let k = 0; k < names.length; k += BATCH) {
				const body = (await session.customRequest('graphDap/summaries', { names: names.slice(k, k + BATCH) })) as { summaries: { name: string; text: string; available: boolean }[] };
				for (const s of body.summaries) if (s.available) summaries.set(s.name, s.text);
			}
		} catch {
			return; // the session moved on
		}
		if (st.last.stop !== stop || st.last.phase !== 'stopped') return;
		show(spreadOf(model, rows, summaries));
	}
}

export function registerFollower(views: GraphViews): vscode.Disposable {
	return vscode.debug.registerDebugAdapterTrackerFactory(DEBUG_TYPE, new GraphFollower(views));
}
