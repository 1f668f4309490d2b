/**
 * "graph-dap: Scan Inputs...": runs `graph-dap scan` on a model over a data set the user picks,
 * with a progress notification that can cancel it, then shows the failing inputs in a tree
 * (grouped by the node where each first goes wrong). Choosing an input starts a debug session
 * on it that stops at that node (its launch configuration comes from scan.json). The report
 * (report.html) opens in a webview.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
	EventReader,
	FailureGroup,
	ScanEvent,
	ScanResult,
	ScanSource,
	describeFailure,
	groupFailures,
	progressMessage,
	replayConfiguration,
	scanArguments,
} from './scanResults';

export const SCAN_VIEW = 'graphDap.scanResults';

type Python = (resource?: vscode.Uri) => Promise<string>;
type ModelOf = (uri?: vscode.Uri) => string | undefined;
type Item = { kind: 'group'; group: FailureGroup } | { kind: 'input'; result: ScanResult };

/** The commands, the tree view and the report panel; disposables for the extension's subscriptions. */
export function registerScan(python: Python, modelOf: ModelOf): vscode.Disposable[] {
	const tree = new ScanTree();
	const view = vscode.window.createTreeView(SCAN_VIEW, { treeDataProvider: tree, showCollapseAll: true });
	return [
		view,
		tree,
		vscode.commands.registerCommand('graphDap.scanInputs', async (uri?: vscode.Uri) => {
			const results = await scanInputs(python, modelOf, uri);
			if (results) {
				tree.load(results);
				view.message = tree.summary;
				await vscode.commands.executeCommand(`${SCAN_VIEW}.focus`);
			}
		}),
		vscode.commands.registerCommand('graphDap.debugScanInput', (result?: ScanResult) => debugInput(result ?? selected(view))),
		vscode.commands.registerCommand('graphDap.openScanReport', () => openReport(tree.reportPath)),
		vscode.commands.registerCommand('graphDap.openScanResults', async () => {
			const picked = await vscode.window.showOpenDialog({ title: 'A scan\'s results', filters: { 'graph-dap scan': ['json'] }, canSelectMany: false });
			if (picked?.[0]) {
				tree.load(picked[0].fsPath);
				view.message = tree.summary;
			}
		}),
	];
}

function selected(view: vscode.TreeView<Item>): ScanResult | undefined {
	const item = view.selection[0];
	return item?.kind === 'input' ? item.result : undefined;
}

async function scanInputs(python: Python, modelOf: ModelOf, uri?: vscode.Uri): Promise<string | undefined> {
	let model = modelOf(uri);
	if (!model) {
		const picked = await vscode.window.showOpenDialog({ title: 'The model to scan', filters: { 'ONNX model': ['onnx'] }, canSelectMany: false });
		model = picked?.[0]?.fsPath;
	}
	if (!model) {
		return undefined;
	}
	const modelUri = vscode.Uri.file(model);
	const folder = vscode.workspace.getWorkspaceFolder(modelUri)?.uri.fsPath ?? path.dirname(model);
	const source = await pickSource(folder);
	if (!source) {
		return undefined;
	}
	const out = path.join(folder, `${path.basename(model, '.onnx')}-scan`);
	const command = await python(modelUri);
	const args = scanArguments(model, source, out);
	const outcome = await vscode.window.withProgress(
		{ location: vscode.ProgressLocation.Notification, title: `graph-dap: scanning ${path.basename(model)}`, cancellable: true },
		(progress, token) => runScan(command, args, folder, progress, token),
	);
	if (outcome.end) {
		const { done, failed, finished } = outcome.end;
		const what = `${done} inputs, ${failed} failing${finished ? '' : ' (stopped: run it again with --resume to go on)'}`;
		void vscode.window.showInformationMessage(`graph-dap scan of ${path.basename(model)}: ${what}.`, 'Open Report').then((choice) => {
			if (choice) {
				openReport(outcome.end!.report);
			}
		});
		return outcome.end.results;
	}
	if (outcome.cancelled) {
		void vscode.window.showInformationMessage(`graph-dap scan stopped; the results so far are in ${out}.`);
		return path.join(out, 'scan.json');
	}
	const why = outcome.stderr.trim().split('\n').pop() || `exit status ${outcome.code}`;
	void vscode.window.showErrorMessage(`graph-dap scan failed: ${why}`);
	return undefined;
}

interface Outcome {
	code: number | null;
	end?: Extract<ScanEvent, { event: 'end' }>;
	cancelled: boolean;
	stderr: string;
}

function runScan(
	command: string,
	args: string[],
	cwd: string,
	progress: vscode.Progress<{ message?: string; increment?: number }>,
	token: vscode.CancellationToken,
): Promise<Outcome> {
	return new Promise((resolve) => {
		const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
		const outcome: Outcome = { code: null, cancelled: false, stderr: '' };
		let total: number | null = null;
		let shown = 0;
		const reader = new EventReader((e) => {
			if (e.event === 'start') {
				total = e.total;
				progress.report({ message: `starting ${e.resumed ? `(${e.resumed} done before)` : ''}` });
			} else if (e.event === 'result') {
				const share = total ? (100 * e.done) / total : 0;
				progress.report({ message: progressMessage(e.done, total, e.failed), increment: Math.max(0, share - shown) });
				shown = Math.max(shown, share);
			} else if (e.event === 'end') {
				outcome.end = e;
			}
		});
		child.stdout.setEncoding('utf8');
		child.stdout.on('data', (d: string) => reader.push(d));
		child.stderr.setEncoding('utf8');
		child.stderr.on('data', (d: string) => (outcome.stderr = (outcome.stderr + d).slice(-8000)));
		const cancel = token.onCancellationRequested(() => {
			outcome.cancelled = true;
			child.kill('SIGTERM'); // the scan writes what it has and stops
		});
		child.on('error', (e) => {
			outcome.stderr += `\n${e.message}`;
		});
		child.on('close', (code) => {
			cancel.dispose();
			reader.end();
			outcome.code = code;
			resolve(outcome);
		});
	});
}

async function pickSource(folder: string): Promise<ScanSource | undefined> {
	const choice = await vscode.window.showQuickPick(
		[
			{ label: 'A folder of inputs', detail: '.npz or .npy files, or ONNX test-data folders (input_0.pb, ...), also in subfolders', source: 'folder' as const },
			{ label: 'Files matching a glob', detail: 'e.g. data/**/*.npz', source: 'glob' as const },
			{ label: 'One .npz with a sample axis', detail: 'each slice of its arrays along the axis is one input', source: 'samples' as const },
			{ label: 'A Python generator', detail: 'MODULE:FUNCTION returning feed dicts', source: 'generator' as const },
		],
		{ title: 'graph-dap: Scan Inputs - where are the inputs?', ignoreFocusOut: true },
	);
	if (!choice) {
		return undefined;
	}
	const base = vscode.Uri.file(folder);
	switch (choice.source) {
		case 'folder': {
			const picked = await vscode.window.showOpenDialog({ title: 'The folder of inputs', canSelectFolders: true, canSelectFiles: false, defaultUri: base });
			return picked?.[0] ? { kind: 'folder', path: picked[0].fsPath } : undefined;
		}
		case 'glob': {
			const pattern = await vscode.window.showInputBox({ title: 'Inputs matching', prompt: `A glob, relative to ${folder}`, value: '**/*.npz', ignoreFocusOut: true });
			return pattern ? { kind: 'glob', pattern: path.isAbsolute(pattern) ? pattern : path.join(folder, pattern) } : undefined;
		}
		case 'samples': {
			const picked = await vscode.window.showOpenDialog({ title: 'The .npz of samples', filters: { NumPy: ['npz', 'npy'] }, defaultUri: base });
			if (!picked?.[0]) {
				return undefined;
			}
			const axis = await vscode.window.showInputBox({ title: 'The sample axis', value: '0', validateInput: (v) => (/^\d+$/.test(v) ? undefined : 'an axis: 0, 1, ...'), ignoreFocusOut: true });
			return axis === undefined ? undefined : { kind: 'samples', path: picked[0].fsPath, axis: Number(axis) };
		}
		case 'generator': {
			const target = await vscode.window.showInputBox({
				title: 'The generator',
				prompt: `MODULE:FUNCTION, importable from ${folder}`,
				validateInput: (v) => (/^[\w.]+:\w+$/.test(v) ? undefined : 'MODULE:FUNCTION, e.g. mydata.loader:samples'),
				ignoreFocusOut: true,
			});
			return target ? { kind: 'generator', target } : undefined;
		}
	}
}

async function debugInput(result?: ScanResult): Promise<void> {
	if (!result) {
		void vscode.window.showErrorMessage('graph-dap: choose a failing input in the scan results.');
		return;
	}
	const replay = replayConfiguration(result);
	if ('problem' in replay) {
		void vscode.window.showErrorMessage(`graph-dap: ${replay.problem}`);
		return;
	}
	const model = String(replay.config.model ?? '');
	const folder = model ? vscode.workspace.getWorkspaceFolder(vscode.Uri.file(model)) : undefined;
	await vscode.debug.startDebugging(folder, replay.config as vscode.DebugConfiguration);
}

let reportPanel: vscode.WebviewPanel | undefined;

function openReport(report: string | undefined): void {
	if (!report) {
		void vscode.window.showErrorMessage('graph-dap: no scan yet: run "graph-dap: Scan Inputs..." first.');
		return;
	}
	let html: string;
	try {
		html = readFileSync(report, 'utf8');
	} catch (e) {
		void vscode.window.showErrorMessage(`graph-dap: cannot read ${report}: ${(e as Error).message}`);
		return;
	}
	if (!reportPanel) {
		reportPanel = vscode.window.createWebviewPanel('graphDap.scanReport', 'Scan Report', vscode.ViewColumn.Active, { enableScripts: true, localResourceRoots: [] });
		reportPanel.onDidDispose(() => (reportPanel = undefined));
	}
	reportPanel.title = `Scan Report: ${path.basename(path.dirname(report))}`;
	reportPanel.webview.html = html;
	reportPanel.reveal();
}

/** The tree of failing inputs of the scan last run or opened. */
class ScanTree implements vscode.TreeDataProvider<Item>, vscode.Disposable {
	private readonly changed = new vscode.EventEmitter<Item | undefined>();
	readonly onDidChangeTreeData = this.changed.event;
	private groups: FailureGroup[] = [];
	reportPath: string | undefined;
	summary: string | undefined;

	load(resultsPath: string): void {
		let data: { results?: ScanResult[]; done?: number; failed?: number; finished?: boolean };
		try {
			data = JSON.parse(readFileSync(resultsPath, 'utf8'));
		} catch (e) {
			void vscode.window.showErrorMessage(`graph-dap: cannot read the scan's results ${resultsPath}: ${(e as Error).message}`);
			return;
		}
		this.groups = groupFailures(data.results ?? []);
		this.reportPath = path.join(path.dirname(resultsPath), 'report.html');
		this.summary = `${data.done ?? 0} inputs, ${data.failed ?? 0} failing${data.finished === false ? ' (not finished)' : ''}`;
		void vscode.commands.executeCommand('setContext', 'graphDap.scanLoaded', true);
		this.changed.fire(undefined);
	}

	getChildren(item?: Item): Item[] {
		if (!item) {
			return this.groups.map((group) => ({ kind: 'group', group }));
		}
		return item.kind === 'group' ? item.group.inputs.map((result) => ({ kind: 'input', result })) : [];
	}

	getTreeItem(item: Item): vscode.TreeItem {
		if (item.kind === 'group') {
			const t = new vscode.TreeItem(item.group.label, vscode.TreeItemCollapsibleState.Expanded);
			t.description = item.group.description;
			t.iconPath = new vscode.ThemeIcon(item.group.key.startsWith('node:') ? 'symbol-function' : 'warning');
			t.contextValue = 'scanGroup';
			return t;
		}
		const r = item.result;
		const t = new vscode.TreeItem(r.id, vscode.TreeItemCollapsibleState.None);
		t.description = describeFailure(r);
		t.tooltip = new vscode.MarkdownString().appendText(`${r.id}: ${r.status}\n\n${r.message}`);
		t.iconPath = new vscode.ThemeIcon(r.replay?.launch ? 'debug-alt' : 'circle-slash');
		t.contextValue = 'scanInput';
		t.command = { command: 'graphDap.debugScanInput', title: 'Debug This Input', arguments: [r] };
		return t;
	}

	dispose(): void {
		this.changed.dispose();
	}
}
