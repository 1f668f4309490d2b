/**
 * A DebugAdapterTracker for graph-dap sessions: writes the DAP traffic to the output channel
 * "graph-dap DAP" (when `graphDap.trace` is on) and tells listeners when a session stops, so
 * that the tensor viewer can follow the session, and when it stops, runs on or ends, so that
 * the listing's language server knows when live values can be asked for.
 */
import * as vscode from 'vscode';
import { DEBUG_TYPE } from './configuration';
import { DebugState, stateFromAdapter, stateFromClient } from './liveValues';

export class ProtocolTracker implements vscode.DebugAdapterTrackerFactory, vscode.Disposable {
	private readonly channel = vscode.window.createOutputChannel('graph-dap DAP');
	private readonly stopped = new vscode.EventEmitter<vscode.DebugSession>();
	/** Fires after a graph-dap session reported `stopped` (a step, a breakpoint, ...). */
	readonly onDidStop = this.stopped.event;
	private readonly states = new vscode.EventEmitter<{ session: vscode.DebugSession; state: DebugState }>();
	/** Fires when a graph-dap session stops, is set running, or ends. */
	readonly onDidChangeState = this.states.event;

	constructor(private readonly enabled: () => boolean) {}

	createDebugAdapterTracker(session: vscode.DebugSession): vscode.DebugAdapterTracker {
		const log = (direction: string, message: unknown) => {
			if (this.enabled()) {
				this.channel.appendLine(`${new Date().toISOString()} [${session.id}] ${direction} ${JSON.stringify(message)}`);
			}
		};
		return {
			onWillStartSession: () => log('start', { name: session.name, configuration: session.configuration }),
			onWillReceiveMessage: (m: { type?: string; command?: string }) => {
				log('-->', m);
				const state = stateFromClient(m);
				if (state) {
					this.states.fire({ session, state });
				}
			},
			onDidSendMessage: (m: { type?: string; event?: string }) => {
				log('<--', m);
				const state = stateFromAdapter(m);
				if (state) {
					setTimeout(() => this.states.fire({ session, state }), 0);
				}
				if (m.type === 'event' && m.event === 'stopped') {
					// The adapter answers further requests only after VS Code has seen the event.
					setTimeout(() => this.stopped.fire(session), 0);
				}
			},
			onError: (e) => log('error', { message: e.message }),
			onExit: (code, signal) => {
				log('exit', { code, signal });
				this.states.fire({ session, state: 'ended' });
			},
		};
	}

	dispose(): void {
		this.channel.dispose();
		this.stopped.dispose();
		this.states.dispose();
	}
}

export function registerTracker(tracker: ProtocolTracker): vscode.Disposable {
	return vscode.debug.registerDebugAdapterTrackerFactory(DEBUG_TYPE, tracker);
}
