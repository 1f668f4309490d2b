/**
 * The graph views follow graph-dap's debug sessions: a DebugAdapterTracker sees each `stopped`
 * event and the stack trace VS Code asks for next; the top frame's listing line is the current
 * node, shown in the view of that listing's model (opened at the first stop when
 * `graphDap.graphView.openOnStop` is on). After a NaN/Inf stop, every stop asks the adapter for the
 * summaries of the values after it (`graphDap/summaries`) and colours where the NaN started and spread.
 */
import * as vscode from 'vscode';
import { DEBUG_TYPE, LISTING_EXT, modelPathFor } from './configuration';
import type { GraphPanel, GraphViews } from './graphView';
import { spreadOf, watchedNodes, watchedValues } from './graphview/follow';
import type { DebugView } from './graphview/protocol';

/** Names in one graphDap/summaries request (the adapter takes at most 2000). */
const BATCH = 2000;
const RESUMING = new Set(['continue', 'next', 'stepIn', 'stepOut', 'stepBack', 'reverseContinue', 'goto', 'graphDap/runTo']);

interface SessionState {
	stops: number;
	pending?: { stop: number; t0: number; at: number; reason: string; text: string };
	panel?: GraphPanel;
	/** Nodes where the run stopped on NaN/Inf. */
	nanStops: string[];
	last: Omit<DebugView, 'current'>;
	line?: number;
}

export class GraphFollower implements vscode.DebugAdapterTrackerFactory {
	private readonly sessions = new Map<string, SessionState>();

	constructor(private readonly views: GraphViews) {}

	createDebugAdapterTracker(session: vscode.DebugSession): vscode.DebugAdapterTracker {
		const st: SessionState = { stops: 0, nanStops: [], last: { session: session.name, phase: 'none', stop: 0, reason: '', text: '', origin: [], spread: [] } };
		this.sessions.set(session.id, st);
		const show = (patch: Partial<Omit<DebugView, 'current'>>) => {
			st.last = { ...st.last, ...patch };
			st.panel?.setDebug(session, st.last, st.line);
		};
		return {
			onDidSendMessage: (m: { type?: string; event?: string; command?: string; success?: boolean; body?: Record<string, unknown> }) => {
				if (m.type === 'event' && m.event === 'stopped') {
					st.stops++;
					st.pending = { stop: st.stops, t0: performance.now(), at: Date.now(), reason: String(m.body?.reason ?? ''), text: String(m.body?.text ?? '') };
					// Ask the top frame ourselves rather than wait for the one VS Code asks for: in a remote
					// workbench (code-server, Codespaces) its request makes a round trip through the browser first.
					// Whichever answer comes first is taken (both pass here as stackTrace responses).
					if (this.views.panels.size) {
						const threadId = Number(m.body?.threadId ?? 1);
						setTimeout(() => void Promise.resolve(session.customRequest('stackTrace', { threadId, startFrame: 0, levels: 1 })).catch(() => undefined), 0);
					}
				} else if (m.type === 'response' && m.command === 'stackTrace' && m.success && st.pending) {
					const frames = (m.body?.stackFrames ?? []) as { line: number; source?: { path?: string } }[];
					const top = frames.find((f) => f.source?.path?.endsWith(LISTING_EXT));
					if (!top) return;
					const pending = st.pending;
					st.pending = undefined;
					this.stopped(session, st, top.source!.path!, top.line, pending, show);
				} else if (m.type === 'event' && m.event === 'continued') {
					show({ phase: 'running' });
				} else if (m.type === 'event' && (m.event === 'terminated' || m.event === 'exited')) {
					show({ phase: 'ended' });
				}
			},
			onWillReceiveMessage: (m: { type?: string; command?: string }) => {
				if (m.type === 'request' && m.command && RESUMING.has(m.command)) show({ phase: 'running' });
			},
			onExit: () => {
				show({ phase: 'ended' });
				this.sessions.delete(session.id);
			},
		};
	}

	private stopped(
		session: vscode.DebugSession,
		st: SessionState,
		listing: string,
		line: number,
		pending: NonNullable<SessionState['pending']>,
		show: (patch: Partial<Omit<DebugView, 'current'>>) => void,
	): void {
		let panel = this.views.byListing(listing);
		if (!panel && st.stops === 1 && vscode.workspace.getConfiguration('graphDap').get<boolean>('graphView.openOnStop', false)) {
			panel = this.views.show(modelPathFor(listing));
		}
		if (!panel) return;
		st.panel = panel;
		st.line = line;
		panel.stopSeen.set(pending.stop, { t0: pending.t0, frames: performance.now() });
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
