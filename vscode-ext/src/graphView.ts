/**
 * The graph view: a webview per model that draws its graph (`python -m graph_dap graph MODEL --json`,
 * the renderer in src/graphview) beside the listing, and keeps it in step with the listing's cursor,
 * the breakpoints and the debugger (graphFollow.ts tells it where each session stopped).
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { GraphDoc, Overlay } from './graphview/doc';
import { nodeAtLine, nodesAtLines } from './graphview/follow';
import { GraphModel } from './graphview/model';
import type { DebugView, FromView, ToView } from './graphview/protocol';
import type { TensorViews } from './tensorView';

/** Runs `python -m graph_dap graph MODEL --json [--overlay F]...` and returns its graph and overlays. */
export function produceGraph(python: string, model: string, overlays: string[] = []): Promise<{ graph: GraphDoc; overlays: Overlay[] }> {
	return new Promise((resolve, reject) => {
		execFile(
			python,
			['-m', 'graph_dap', 'graph', model, '--json', ...overlays.flatMap((o) => ['--overlay', o])],
			{ maxBuffer: 1024 * 1024 * 1024, timeout: 180_000, windowsHide: true },
			(error, stdout, stderr) => {
				if (error) {
					const line = String(stderr).trim().split('\n').slice(-1)[0];
					reject(new Error(line || error.message));
					return;
				}
				try {
					resolve(JSON.parse(stdout));
				} catch (e) {
					reject(new Error(`graph-dap graph printed no JSON: ${(e as Error).message}`));
				}
			},
		);
	});
}

export interface GraphViewHost {
	python(model: string): Promise<string>;
	/** The listing's file of a model (beside it, or in the extension's storage). */
	listingOf(model: string): string;
	tensors: TensorViews;
	log(line: string): void;
}

export class GraphPanel {
	readonly panel: vscode.WebviewPanel;
	model?: GraphModel;
	private ready = false;
	private queue: ToView[] = [];
	private lastDebug?: DebugView;
	private lastLine?: number;
	/** The listing line the graph last selected: the cursor moving there is not sent back. */
	private echo = -1;
	/** The session shown, and when each of its stops was seen (for the highlight's latency). */
	session?: vscode.DebugSession;
	readonly stopSeen = new Map<number, { t0: number; frames: number }>();
	private readonly disposables: vscode.Disposable[] = [];

	constructor(
		private readonly extensionUri: vscode.Uri,
		readonly modelPath: string,
		private readonly host: GraphViewHost,
		onDispose: () => void,
	) {
		this.panel = vscode.window.createWebviewPanel('graphDap.graphView', `Graph: ${path.basename(modelPath)}`, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, {
			enableScripts: true,
			retainContextWhenHidden: true,
			localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist')],
		});
		this.panel.webview.html = this.html();
		this.disposables.push(
			this.panel.webview.onDidReceiveMessage((m: FromView) => void this.received(m)),
			vscode.debug.onDidChangeBreakpoints(() => this.sendBreakpoints()),
			vscode.window.onDidChangeTextEditorSelection((e) => this.cursorMoved(e)),
		);
		this.panel.onDidDispose(() => {
			this.disposables.forEach((d) => d.dispose());
			onDispose();
		});
		void this.load();
	}

	get listing(): string {
		return this.host.listingOf(this.modelPath);
	}

	reveal(): void {
		this.panel.reveal(undefined, true);
	}

	post(m: ToView): void {
		if (this.ready) void this.panel.webview.postMessage(m);
		else this.queue.push(m);
	}

	/** Shows a session's state; `line` is the listing line of its top frame (the current node's). */
	setDebug(session: vscode.DebugSession, debug: Omit<DebugView, 'current'>, line?: number): void {
		this.session = session;
		this.lastLine = line;
		this.lastDebug = { ...debug, current: this.model && line ? (nodeAtLine(this.model, line) ?? null) : null };
		if (this.model) this.post({ type: 'debug', debug: this.lastDebug });
	}

	/** The current node of the last stop shown. */
	get current(): string | null {
		return this.lastDebug?.current ?? null;
	}

	async addOverlay(file: string): Promise<void> {
		try {
			const { overlays } = await produceGraph(await this.host.python(this.modelPath), this.modelPath, [file]);
			overlays.forEach((overlay) => this.post({ type: 'overlay', overlay }));
		} catch (e) {
			void vscode.window.showErrorMessage(`graph-dap: cannot show ${path.basename(file)} on the graph: ${(e as Error).message}`);
		}
	}

	private async load(): Promise<void> {
		this.post({ type: 'status', text: `reading ${path.basename(this.modelPath)}…` });
		try {
			const t0 = Date.now();
			const { graph, overlays } = await produceGraph(await this.host.python(this.modelPath), this.modelPath);
			this.model = new GraphModel(graph);
			this.post({ type: 'graph', graph, overlays });
			this.host.log(`graph of ${this.modelPath}: ${graph.nodes.length} nodes in ${Date.now() - t0} ms`);
			this.sendBreakpoints();
			if (this.lastDebug && this.session) this.setDebug(this.session, this.lastDebug, this.lastLine);
		} catch (e) {
			this.post({ type: 'status', text: `graph-dap could not read ${this.modelPath}: ${(e as Error).message}`, error: true });
		}
	}

	private sendBreakpoints(): void {
		if (!this.model) return;
		const listing = this.listing;
		const lines = vscode.debug.breakpoints
			.filter((b): b is vscode.SourceBreakpoint => b instanceof vscode.SourceBreakpoint && b.enabled && b.location.uri.fsPath === listing)
			.map((b) => b.location.range.start.line + 1);
		this.post({ type: 'breakpoints', nodes: nodesAtLines(this.model, lines) });
	}

	private cursorMoved(e: vscode.TextEditorSelectionChangeEvent): void {
		if (!this.model || e.textEditor.document.uri.fsPath !== this.listing) return;
		const line = e.selections[0].active.line + 1;
		if (line === this.echo) {
			this.echo = -1; // the move the graph asked for: not sent back, once
			return;
		}
		const node = nodeAtLine(this.model, line);
		if (node && this.model.lineRow.has(this.model.doc.nodes[this.model.nodeRow.get(node)!][4])) this.post({ type: 'select', node });
	}

	private lineOf(node: string): number | undefined {
		const row = this.model?.nodeRow.get(node);
		return row === undefined ? undefined : this.model!.doc.nodes[row][4] || undefined;
	}

	/** Shows the listing at a node's line, beside the graph, without taking the focus. */
	private async revealLine(node: string): Promise<void> {
		const line = this.lineOf(node);
		if (!line) return;
		const uri = vscode.Uri.file(this.listing);
		const open = vscode.window.visibleTextEditors.find((ed) => ed.document.uri.fsPath === uri.fsPath);
		this.echo = line;
		const editor = open ?? (await vscode.window.showTextDocument(uri, { preserveFocus: true, preview: false, viewColumn: vscode.ViewColumn.One }));
		const pos = new vscode.Position(line - 1, 0);
		editor.selection = new vscode.Selection(pos, pos);
		editor.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
	}

	private async toggleBreakpoint(node: string): Promise<void> {
		const line = this.lineOf(node);
		if (!line) return;
		const listing = this.listing;
		const existing = vscode.debug.breakpoints.filter(
			(b) => b instanceof vscode.SourceBreakpoint && b.location.uri.fsPath === listing && b.location.range.start.line === line - 1,
		);
		if (existing.length) vscode.debug.removeBreakpoints(existing);
		else vscode.debug.addBreakpoints([new vscode.SourceBreakpoint(new vscode.Location(vscode.Uri.file(listing), new vscode.Position(line - 1, 0)))]);
	}

	private stoppedSession(): vscode.DebugSession | undefined {
		if (this.session && this.lastDebug?.phase === 'stopped') return this.session;
		void vscode.window.showInformationMessage('graph-dap: this needs a debug session of this model stopped at a node (F5 starts one).');
		return undefined;
	}

	private async received(m: FromView): Promise<void> {
		switch (m.type) {
			case 'ready':
				this.ready = true;
				this.queue.forEach((q) => void this.panel.webview.postMessage(q));
				this.queue = [];
				return;
			case 'select':
				return this.revealLine(m.node);
			case 'toggleBreakpoint':
				return this.toggleBreakpoint(m.node);
			case 'drawn': {
				const seen = this.stopSeen.get(m.stop);
				if (seen !== undefined) {
					this.host.log(
						`stop ${m.stop}: highlighted ${m.ms.toFixed(0)} ms after the stopped event ` +
							`(the node known ${(seen.frames - seen.t0).toFixed(1)} ms after it, ${m.view.toFixed(1)} ms in the view)`,
					);
					this.stopSeen.delete(m.stop);
				}
				return;
			}
			case 'openOverlay': {
				const picked = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'graph-dap JSON': ['json'] }, title: 'Overlay: compare --json, profile --json or scan.json' });
				if (picked?.[0]) await this.addOverlay(picked[0].fsPath);
				return;
			}
			case 'export': {
				const ext = m.format;
				const target = await vscode.window.showSaveDialog({
					defaultUri: vscode.Uri.file(this.modelPath.replace(/\.onnx$/, '') + `-graph.${ext}`),
					filters: { [ext.toUpperCase()]: [ext] },
				});
				if (!target) return;
				const data = ext === 'png' ? Buffer.from(m.data.slice(m.data.indexOf(',') + 1), 'base64') : Buffer.from(m.data, 'utf8');
				await fs.writeFile(target.fsPath, data);
				void vscode.window.showInformationMessage(`graph-dap: wrote ${target.fsPath}`);
				return;
			}
			case 'viewTensor': {
				const session = this.stoppedSession();
				if (session) this.host.tensors.show(m.value, session);
				return;
			}
			case 'runTo': {
				const session = this.stoppedSession();
				if (session) await session.customRequest('graphDap/runTo', { node: m.node }).then(undefined, (e: Error) => vscode.window.showErrorMessage(`graph-dap: ${e.message}`));
				return;
			}
			case 'jumpTo': {
				// VS Code's own Jump to Cursor on the node's line of the listing: a custom gotoTargets request
				// would carry the listing as a path, which a remote workbench (code-server) rewrites.
				const line = this.lineOf(m.node);
				if (!this.stoppedSession() || !line) return;
				const open = vscode.window.visibleTextEditors.find((ed) => ed.document.uri.fsPath === this.listing);
				const pos = new vscode.Position(line - 1, 0);
				this.echo = line;
				await vscode.window.showTextDocument(open?.document.uri ?? vscode.Uri.file(this.listing), {
					viewColumn: open?.viewColumn ?? vscode.ViewColumn.One,
					selection: new vscode.Range(pos, pos),
					preserveFocus: false,
					preview: false,
				});
				await vscode.commands.executeCommand('debug.jumpToCursor');
				return;
			}
			case 'summaries': {
				const session = this.session;
				if (!session || this.lastDebug?.phase !== 'stopped') return;
				try {
					const body = (await session.customRequest('graphDap/summaries', { names: m.names })) as { summaries: { name: string; text: string; available: boolean }[] };
					this.post({ type: 'summaries', request: m.request, summaries: body.summaries });
				} catch {
					// the session moved on: no summaries
				}
				return;
			}
		}
	}

	private html(): string {
		const webview = this.panel.webview;
		const nonce = Array.from({ length: 4 }, () => Math.random().toString(36).slice(2)).join('');
		const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'dist', 'graphview.js'));
		return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${webview.cspSource} data: blob:; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Graph</title>
</head>
<body>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
	}
}

/** The graph views, one per model. */
export class GraphViews implements vscode.Disposable {
	readonly panels = new Map<string, GraphPanel>();

	constructor(
		private readonly extensionUri: vscode.Uri,
		readonly host: GraphViewHost,
	) {}

	/** Opens (or reveals) the graph view of `model`. */
	show(model: string): GraphPanel {
		let panel = this.panels.get(model);
		if (!panel) {
			panel = new GraphPanel(this.extensionUri, model, this.host, () => this.panels.delete(model));
			this.panels.set(model, panel);
		} else {
			panel.reveal();
		}
		return panel;
	}

	/** The view whose listing is `file` (a frame's source). */
	byListing(file: string): GraphPanel | undefined {
		for (const p of this.panels.values()) if (p.listing === file) return p;
		return undefined;
	}

	dispose(): void {
		this.panels.forEach((p) => p.panel.dispose());
	}
}
