/**
 * The listing's language server (`python -m graph_dap lsp`) through vscode-languageclient: started with
 * the debugger's interpreter, restarted when it dies, logging to the output channel
 * "graph-dap Language Server". The extension also carries live values between the debug adapter
 * and the server (PROTOCOL.md): it tells the server when a graph-dap session stops or runs on, and
 * answers the server's `graphDap/liveSummaries` with the adapter's `graphDap/summaries`.
 * "Run to here" and "Break on every <op>" (the server's code actions and lenses) are the commands
 * `graphDap.runToNode` and `graphDap.breakOnOpType`, forwarded to the debug session.
 */
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
	CloseAction,
	CloseHandlerResult,
	ErrorAction,
	ErrorHandler,
	ErrorHandlerResult,
	LanguageClient,
	LanguageClientOptions,
	Message,
	ServerOptions,
	State,
	TransportKind,
} from 'vscode-languageclient/node';
import { DEBUG_TYPE } from './configuration';
import { DebugState, liveAnswer, samePath, serverSettings } from './liveValues';
import { LANGUAGE_ID } from './listing';

const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 3 * 60_000;

/** Restarts the server whenever it dies, unless it died MAX_RESTARTS times in RESTART_WINDOW_MS. */
class Restarter implements ErrorHandler {
	private deaths: number[] = [];

	constructor(private readonly channel: vscode.OutputChannel) {}

	error(_error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult {
		return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown };
	}

	closed(): CloseHandlerResult {
		const now = Date.now();
		this.deaths = [...this.deaths.filter((t) => now - t < RESTART_WINDOW_MS), now];
		if (this.deaths.length > MAX_RESTARTS) {
			const message = `the graph-dap language server died ${this.deaths.length} times in 3 minutes: not restarting it (see the output channel)`;
			this.channel.appendLine(message);
			return { action: CloseAction.DoNotRestart, message: `graph-dap: ${message}` };
		}
		this.channel.appendLine('the graph-dap language server stopped: restarting it');
		return { action: CloseAction.Restart, handled: true };
	}
}

export class ListingLanguageServer implements vscode.Disposable {
	private client: LanguageClient | undefined;
	private readonly channel = vscode.window.createOutputChannel('graph-dap Language Server');
	private readonly disposables: vscode.Disposable[] = [];
	private readonly state = new Map<string, DebugState>();

	/**
	 * @param interpreter the Python that runs the debugger (undefined with a message when it lacks graph_dap)
	 * @param onRunning told whether the server runs (the extension's own outline steps in when it does not)
	 */
	constructor(
		private readonly interpreter: () => Promise<{ command: string; problem?: string }>,
		private readonly onRunning: (running: boolean) => void,
	) {
		this.disposables.push(
			vscode.workspace.onDidChangeConfiguration((e) => {
				if (e.affectsConfiguration('graphDap.python') || e.affectsConfiguration('python')) {
					void this.restart();
				} else if (e.affectsConfiguration('graphDap.listing')) {
					void this.client?.sendNotification('workspace/didChangeConfiguration', { settings: { graphDap: this.settings() } });
				}
			}),
			vscode.commands.registerCommand('graphDap.runToNode', (args?: { node?: string; model?: string }) => runToNode(args)),
			vscode.commands.registerCommand('graphDap.breakOnOpType', (args?: { opType?: string }) => breakOnOpType(args)),
			vscode.commands.registerCommand('graphDap.restartLanguageServer', () => this.restart()),
		);
	}

	private settings() {
		const config = vscode.workspace.getConfiguration('graphDap');
		return serverSettings(<T>(key: string, fallback: T) => config.get<T>(key, fallback));
	}

	async start(): Promise<void> {
		if (!vscode.workspace.getConfiguration('graphDap').get<boolean>('languageServer', true)) {
			this.channel.appendLine('graphDap.languageServer is off: listings are coloured by the grammar only');
			this.onRunning(false);
			return;
		}
		const { command, problem } = await this.interpreter();
		if (problem) {
			this.channel.appendLine(`not starting the language server: ${problem}`);
			this.onRunning(false);
			return;
		}
		const server: ServerOptions = { command, args: ['-m', 'graph_dap', 'lsp'], transport: TransportKind.stdio };
		const options: LanguageClientOptions = {
			documentSelector: [{ scheme: 'file', language: LANGUAGE_ID }],
			outputChannel: this.channel,
			initializationOptions: this.settings(),
			errorHandler: new Restarter(this.channel),
			synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.onnx') },
		};
		const client = new LanguageClient('graphDapListing', 'graph-dap Language Server', server, options);
		client.onDidChangeState((e) => this.onRunning(e.newState === State.Running));
		this.client = client;
		this.channel.appendLine(`starting ${command} -m graph_dap lsp`);
		try {
			await client.start();
		} catch (e) {
			this.channel.appendLine(`the language server did not start: ${(e as Error).message}`);
			this.onRunning(false);
			return;
		}
		client.onRequest('graphDap/liveSummaries', (params: { model?: string; names?: unknown }) => this.liveSummaries(params));
		for (const [model, state] of this.state) {
			void client.sendNotification('graphDap/debugState', { model, state });
		}
	}

	async restart(): Promise<void> {
		const old = this.client;
		this.client = undefined;
		if (old) {
			await old.stop().catch(() => undefined);
		}
		await this.start();
	}

	/** A graph-dap session of `model` stopped, ran on or ended: tell the server. */
	debugState(session: vscode.DebugSession, state: DebugState): void {
		const model = session.configuration.model;
		if (typeof model !== 'string' || this.state.get(model) === state) {
			return;
		}
		this.state.set(model, state);
		if (state === 'ended') {
			this.state.delete(model);
		}
		void this.client?.sendNotification('graphDap/debugState', { model, state });
	}

	private async liveSummaries(params: { model?: string; names?: unknown }): Promise<{ summaries: unknown[] }> {
		const session = sessionOf(params.model);
		if (!session || !Array.isArray(params.names)) {
			return { summaries: [] };
		}
		try {
			const body = await session.customRequest('graphDap/summaries', { names: params.names });
			return liveAnswer(params.names, body);
		} catch (e) {
			this.channel.appendLine(`graphDap/summaries failed: ${(e as Error).message}`);
			return { summaries: [] };
		}
	}

	dispose(): void {
		void this.client?.stop();
		this.disposables.forEach((d) => d.dispose());
		this.channel.dispose();
	}
}

/** The graph-dap session of `model` (the active one first), if any. */
function sessionOf(model?: string): vscode.DebugSession | undefined {
	const insensitive = process.platform === 'win32' || process.platform === 'darwin';
	const real = (p: string) => {
		try {
			return fs.realpathSync(p);
		} catch {
			return p;
		}
	};
	const matches = (s: vscode.DebugSession | undefined) =>
		!!s && s.type === DEBUG_TYPE && (model === undefined || (typeof s.configuration.model === 'string' && samePath(real(s.configuration.model), real(model), insensitive)));
	const active = vscode.debug.activeDebugSession;
	return matches(active) ? active : undefined;
}

async function runToNode(args?: { node?: string; model?: string }): Promise<void> {
	if (!args?.node) {
		return;
	}
	const session = sessionOf(args.model) ?? (vscode.debug.activeDebugSession?.type === DEBUG_TYPE ? vscode.debug.activeDebugSession : undefined);
	if (!session) {
		void vscode.window.showInformationMessage(`graph-dap: "Run to ${args.node}" needs a stopped ONNX Graph debug session of this model (F5 starts one).`);
		return;
	}
	try {
		await session.customRequest('graphDap/runTo', { node: args.node });
	} catch (e) {
		void vscode.window.showErrorMessage(`graph-dap: cannot run to ${args.node}: ${(e as Error).message}`);
	}
}

function breakOnOpType(args?: { opType?: string }): void {
	if (!args?.opType) {
		return;
	}
	const name = `op:${args.opType}`;
	const present = vscode.debug.breakpoints.some((b) => b instanceof vscode.FunctionBreakpoint && b.functionName === name);
	if (!present) {
		vscode.debug.addBreakpoints([new vscode.FunctionBreakpoint(name)]);
	}
	void vscode.window.showInformationMessage(`graph-dap: a breakpoint on every ${args.opType} node (${name}) ${present ? 'is already set' : 'is set'}.`);
}
