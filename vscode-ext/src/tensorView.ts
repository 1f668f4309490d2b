/**
 * The tensor viewer: a webview per tensor that shows a 2-D slice as a heatmap, a histogram and
 * the statistics, from the adapter's `graphDap/tensorView` request. It follows the session:
 * after each stop it asks again and shows the new value.
 */
import * as vscode from 'vscode';
import { DEBUG_TYPE } from './configuration';
import { FromWebview, TENSOR_VIEW_REQUEST, TensorViewArguments, TensorViewBody, ToWebview } from './tensorProtocol';

export class TensorViews implements vscode.Disposable {
	private readonly panels = new Map<string, TensorPanel>();
	private readonly subscriptions: vscode.Disposable[] = [];

	constructor(
		private readonly extensionUri: vscode.Uri,
		onDidStop: vscode.Event<vscode.DebugSession>,
	) {
		this.subscriptions.push(
			onDidStop((session) => this.panels.forEach((p) => p.sessionStopped(session))),
			vscode.debug.onDidTerminateDebugSession((session) => this.panels.forEach((p) => p.sessionEnded(session))),
		);
	}

	/** Opens (or reveals) the viewer of tensor `name` in `session`. */
	show(name: string, session: vscode.DebugSession): void {
		let panel = this.panels.get(name);
		if (!panel) {
			panel = new TensorPanel(this.extensionUri, name, session, () => this.panels.delete(name));
			this.panels.set(name, panel);
		} else {
			panel.reveal(session);
		}
	}

	dispose(): void {
		this.panels.forEach((p) => p.dispose());
		this.subscriptions.forEach((d) => d.dispose());
	}
}

class TensorPanel {
	private readonly panel: vscode.WebviewPanel;
	private index: number[] | undefined;
	private ready = false;
	private pending: ToWebview | undefined;
	private generation = 0;

	constructor(
		private readonly extensionUri: vscode.Uri,
		private readonly name: string,
		private session: vscode.DebugSession,
		onDispose: () => void,
	) {
		this.panel = vscode.window.createWebviewPanel('graphDap.tensorView', `Tensor: ${name}`, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, {
			enableScripts: true,
			retainContextWhenHidden: true,
			localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist'), vscode.Uri.joinPath(extensionUri, 'media')],
		});
		this.panel.webview.html = this.html();
		this.panel.webview.onDidReceiveMessage((m: FromWebview) => this.received(m));
		this.panel.onDidDispose(() => {
			this.generation = -1;
			onDispose();
		});
	}

	reveal(session: vscode.DebugSession): void {
		this.session = session;
		this.panel.reveal();
		void this.refresh();
	}

	sessionStopped(session: vscode.DebugSession): void {
		if (session.type !== DEBUG_TYPE) {
			return;
		}
		// A restarted or new session takes over the viewer.
		this.session = session;
		void this.refresh();
	}

	sessionEnded(session: vscode.DebugSession): void {
		if (session.id === this.session.id) {
			this.post({ type: 'status', text: 'The debug session has ended: this is the last value seen.' });
		}
	}

	dispose(): void {
		this.panel.dispose();
	}

	private received(m: FromWebview): void {
		if (m.type === 'ready') {
			this.ready = true;
			if (this.pending) {
				void this.panel.webview.postMessage(this.pending);
				this.pending = undefined;
			}
			void this.refresh();
		} else if (m.type === 'setIndex') {
			this.index = m.index;
			void this.refresh();
		} else if (m.type === 'refresh') {
			void this.refresh();
		}
	}

	private post(m: ToWebview): void {
		if (this.ready) {
			void this.panel.webview.postMessage(m);
		} else {
			this.pending = m;
		}
	}

	private async refresh(): Promise<void> {
		if (!this.ready || this.generation < 0) {
			return;
		}
		const generation = ++this.generation;
		const args: TensorViewArguments = {
			name: this.name,
			maxSize: vscode.workspace.getConfiguration('graphDap').get<number>('tensorView.maxSize', 256),
		};
		if (this.index) {
			args.index = this.index;
		}
		try {
			const body = (await this.session.customRequest(TENSOR_VIEW_REQUEST, args)) as TensorViewBody;
			if (generation === this.generation) {
				this.post({ type: 'data', body, session: this.session.name });
			}
		} catch (e) {
			if (generation === this.generation) {
				this.post({ type: 'error', message: (e as Error).message });
			}
		}
	}

	private html(): string {
		const webview = this.panel.webview;
		const nonce = Array.from({ length: 4 }, () => Math.random().toString(36).slice(2)).join('');
		const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'dist', 'webview.js'));
		const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'tensorView.css'));
		return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${webview.cspSource} data:; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${style}">
<title>Tensor: ${escapeHtml(this.name)}</title>
</head>
<body>
<header><h1 id="title">${escapeHtml(this.name)}</h1><div id="subtitle"></div><div id="status" role="status"></div></header>
<section id="indices" aria-label="Slice indices"></section>
<section id="maps" hidden>
  <figure id="heatmap-figure"><canvas id="heatmap" aria-label="Heatmap of the slice"></canvas><canvas id="colorbar" aria-label="Colour scale"></canvas><div id="scale"><span id="scale-max"></span><span id="scale-min"></span></div><figcaption id="legend"></figcaption></figure>
  <table id="stats" aria-label="Statistics of the whole tensor"></table>
  <div id="tooltip" hidden></div>
</section>
<section id="histogram-section" hidden><h2>Histogram <label><input type="checkbox" id="logscale"> log counts</label></h2><canvas id="histogram" aria-label="Histogram of the finite values"></canvas><div id="histogram-axis"></div></section>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
	}
}

function escapeHtml(s: string): string {
	return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}
