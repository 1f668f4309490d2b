/**
 * The graph view's entry point, one bundle for both places it runs: in a VS Code webview (the
 * extension posts the graph and the debugger's state) and in the page `graph-dap graph --out`
 * writes (the graph and overlays are in the page; exports are downloads).
 */
import type { GraphDoc, Overlay } from './doc';
import type { FromView, Host, ToView } from './protocol';
import { GraphView } from './view';

declare function acquireVsCodeApi(): { postMessage(m: FromView): void };

function download(name: string, data: string): void {
	const a = document.createElement('a');
	a.href = data.startsWith('data:') ? data : URL.createObjectURL(new Blob([data], { type: 'image/svg+xml' }));
	a.download = name;
	document.body.append(a);
	a.click();
	a.remove();
}

function pageHost(model: string): Host {
	return {
		live: false,
		post(m: FromView) {
			if (m.type === 'export') download(`${model.replace(/\.onnx$/, '')}-graph.${m.format}`, m.data);
		},
	};
}

function start(): void {
	const inPage = document.getElementById('graph-data');
	let view: GraphView;
	try {
		if (inPage) {
			const doc = JSON.parse(inPage.textContent ?? '') as GraphDoc;
			const overlays = JSON.parse(document.getElementById('graph-overlays')?.textContent || '[]') as Overlay[];
			view = new GraphView(pageHost(doc.model));
			(window as unknown as { graphView: GraphView }).graphView = view;
			view.setGraph(doc, overlays);
			view.status(`${doc.model}: ${doc.nodes.length} nodes`);
			return;
		}
		const vscode = acquireVsCodeApi();
		view = new GraphView({ live: true, post: (m) => vscode.postMessage(m) });
		(window as unknown as { graphView: GraphView }).graphView = view;
		window.addEventListener('message', (e: MessageEvent<ToView>) => {
			const m = e.data;
			try {
				if (m.type === 'graph') {
					view.setGraph(m.graph, m.overlays);
					view.status(`${m.graph.model}: ${m.graph.nodes.length} nodes`);
				} else if (m.type === 'overlay') view.addOverlay(m.overlay);
				else if (m.type === 'debug') view.setDebug(m.debug);
				else if (m.type === 'breakpoints') view.setBreakpoints(m.nodes);
				else if (m.type === 'select') view.select(m.node);
				else if (m.type === 'summaries') view.summaries(m.request, m.summaries);
				else if (m.type === 'status') view.status(m.text, m.error);
			} catch (error) {
				document.body.dataset.error = String(error);
				view.status(`graph view: ${(error as Error).message}`, true);
			}
		});
		vscode.postMessage({ type: 'ready' });
	} catch (error) {
		document.body.dataset.error = String(error);
		document.body.textContent = `graph-dap graph view: ${(error as Error).message}`;
	}
}

start();
