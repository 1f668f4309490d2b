/**
 * graph-dap's VS Code extension: the debugger type `graph-dap` ("ONNX Graph"), F5 on a model or
 * its listing, the listing as the default editor of `.onnx` files, and the tensor viewer.
 * Shaped after microsoft/vscode-mock-debug's extension.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
	DEBUG_TYPE,
	GraphDapConfiguration,
	LISTING_EXT,
	MODEL_EXT,
	configurationForModel,
	describeAdapter,
	finishConfiguration,
	isModelOrListing,
	listingNamesSource,
	listingPathFor,
	modelPathFor,
	resolveConfiguration,
} from './configuration';
import { Interpreter, PythonExtensionApi, RunResult, checkGraphDap, chooseInterpreter, expandSetting } from './interpreter';
import { LANGUAGE_ID, ListingFiles, ListingLanguageFeatures, ModelEditorProvider } from './listing';
import { ListingLanguageServer } from './languageServer';
import { TensorViews } from './tensorView';
import { VariablesContext, tensorNameFromContext } from './variablesContext';
import { ProtocolTracker, registerTracker } from './tracker';
import { registerScan } from './scan';
import { WarmAdapters } from './warmAdapter';
import { GraphViews } from './graphView';
import { registerFollower } from './graphFollow';

export function activate(context: vscode.ExtensionContext): void {
	const tracker = new ProtocolTracker(() => vscode.workspace.getConfiguration('graphDap').get<boolean>('trace', false));
	const listings = new ListingFiles(context.globalStorageUri.fsPath);
	const tensors = new TensorViews(context.extensionUri, tracker.onDidStop);
	const interpreter = new InterpreterService();
	const listingFeatures = new ListingLanguageFeatures();
	const python = async (resource?: vscode.Uri) => (await interpreter.get(resource)).command;
	const warm = new WarmAdapters(() => vscode.workspace.getConfiguration('graphDap').get<boolean>('warmStart', true));
	const adapters = new AdapterFactory(interpreter, warm);
	const graphLog = vscode.window.createOutputChannel('graph-dap Graph');
	const graphs = new GraphViews(context.extensionUri, {
		python: async (model) => python(vscode.Uri.file(model)),
		listingOf: (model) => listings.movedListing(model) ?? listingPathFor(model),
		tensors,
		log: (line) => graphLog.appendLine(`${new Date().toISOString()} ${line}`),
	});
	// The model of the last model editor that was active: F5 from the model's Python source debugs it.
	let recentModel: string | undefined;
	const rememberModel = () => {
		const file = activeFile(listings);
		if (isModelOrListing(file)) {
			recentModel = modelPathFor(file);
		}
	};
	rememberModel();

	// The extension's own outline, for when the language server is not running (it gives one).
	let fallbackOutline: vscode.Disposable | undefined = vscode.languages.registerDocumentSymbolProvider(LANGUAGE_ID, listingFeatures);
	const server = new ListingLanguageServer(
		async () => {
			const chosen = await interpreter.get(undefined);
			return { command: chosen.command, problem: await interpreter.problem(chosen) };
		},
		(running) => {
			if (running && fallbackOutline) {
				fallbackOutline.dispose();
				fallbackOutline = undefined;
			} else if (!running && !fallbackOutline) {
				fallbackOutline = vscode.languages.registerDocumentSymbolProvider(LANGUAGE_ID, listingFeatures);
			}
		},
	);
	void server.start();
	// A model or a listing was opened: the F5 that likely follows finds its adapter started.
	void interpreter.get(undefined).then((chosen) => {
		const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
		if (folder) {
			const d = describeAdapter({}, chosen.command);
			if (d.kind === 'executable') {
				warm.prepare(d.command, d.args, folder, WARM_AFTER_ACTIVATION_MS);
			}
		}
	});

	context.subscriptions.push(
		tracker,
		registerTracker(tracker),
		tensors,
		server,
		tracker.onDidChangeState(({ session, state }) => server.debugState(session, state)),
		{ dispose: () => fallbackOutline?.dispose() },
		vscode.languages.registerEvaluatableExpressionProvider(LANGUAGE_ID, listingFeatures),
		vscode.window.registerCustomEditorProvider(ModelEditorProvider.viewType, new ModelEditorProvider(python, listings), {
			supportsMultipleEditorsPerDocument: true,
		}),
		vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, new ConfigurationProvider(interpreter, listings, () => recentModel)),
		vscode.window.onDidChangeActiveTextEditor(rememberModel),
		vscode.window.tabGroups.onDidChangeTabs(rememberModel),
		vscode.debug.registerDebugConfigurationProvider(DEBUG_TYPE, new DynamicConfigurations(), vscode.DebugConfigurationProviderTriggerKind.Dynamic),
		warm,
		vscode.debug.registerDebugAdapterDescriptorFactory(DEBUG_TYPE, adapters),
		// The next session's adapter starts once this one is over (not beside it: they would share the cores).
		vscode.debug.onDidTerminateDebugSession((session) => {
			if (session.type === DEBUG_TYPE) {
				adapters.prepareNext(WARM_AFTER_SESSION_MS);
			}
		}),
		vscode.commands.registerCommand('graphDap.debugModel', (uri?: vscode.Uri) => startModel(listings, uri, false)),
		vscode.commands.registerCommand('graphDap.runModel', (uri?: vscode.Uri) => startModel(listings, uri, true)),
		vscode.commands.registerCommand('graphDap.showListing', async (uri?: vscode.Uri) => {
			const model = targetModel(listings, uri);
			if (!model) {
				void vscode.window.showErrorMessage('graph-dap: select an .onnx model to show its listing.');
				return;
			}
			try {
				await listings.show(await python(vscode.Uri.file(model)), model);
			} catch (e) {
				void vscode.window.showErrorMessage(`graph-dap could not list ${model}: ${(e as Error).message}`);
			}
		}),
		graphLog,
		graphs,
		registerFollower(graphs),
		vscode.commands.registerCommand('graphDap.showGraph', (uri?: vscode.Uri) => {
			const model = targetModel(listings, uri);
			if (!model) {
				void vscode.window.showErrorMessage('graph-dap: select an .onnx model to show its graph.');
				return;
			}
			graphs.show(model);
		}),
		vscode.commands.registerCommand('graphDap.graphOverlay', async (uri?: vscode.Uri) => {
			const model = targetModel(listings, undefined) ?? [...graphs.panels.keys()].pop();
			const panel = model ? graphs.panels.get(model) ?? graphs.show(model) : undefined;
			if (!panel) {
				void vscode.window.showErrorMessage('graph-dap: open a model\'s graph view first (Show Graph View).');
				return;
			}
			const file = uri instanceof vscode.Uri ? uri : (await vscode.window.showOpenDialog({ canSelectMany: false, filters: { 'graph-dap JSON': ['json'] } }))?.[0];
			if (file) await panel.addOverlay(file.fsPath);
		}),
		vscode.commands.registerCommand('graphDap.viewTensor', (ctx?: VariablesContext) => viewTensor(tensors, ctx)),
		...registerScan(python, (uri) => targetModel(listings, uri)),
		// A listing served by sourceReference (no file) opens as a `debug:` document: colour it too.
		vscode.workspace.onDidOpenTextDocument((doc) => {
			if (doc.uri.scheme === 'debug' && doc.uri.path.endsWith(LISTING_EXT) && doc.languageId !== LANGUAGE_ID) {
				void vscode.languages.setTextDocumentLanguage(doc, LANGUAGE_ID);
			}
		}),
		vscode.workspace.onDidChangeConfiguration((e) => {
			if (e.affectsConfiguration('graphDap.python') || e.affectsConfiguration('python')) {
				interpreter.forget();
				warm.forget();
			}
			if (e.affectsConfiguration('graphDap.warmStart')) {
				warm.forget();
			}
		}),
	);
}

export function deactivate(): void {
	// Everything is disposed through context.subscriptions.
}

/** The interpreter for a resource, and a cache of the ones known to have graph_dap. */
class InterpreterService {
	private readonly verified = new Set<string>();

	async get(resource?: vscode.Uri): Promise<Interpreter> {
		const setting = vscode.workspace.getConfiguration('graphDap', resource).get<string>('python', '');
		const folder = resource ? vscode.workspace.getWorkspaceFolder(resource) : vscode.workspace.workspaceFolders?.[0];
		const expanded = expandSetting(setting, { home: process.env.HOME, workspaceFolder: folder?.uri.fsPath });
		return chooseInterpreter(expanded, pythonExtensionApi, resource);
	}

	/** undefined when graph_dap is importable by the interpreter; else the message to show. */
	async problem(interpreter: Interpreter): Promise<string | undefined> {
		if (this.verified.has(interpreter.command)) {
			return undefined;
		}
		const result = await checkGraphDap(interpreter, run);
		if (result.ok) {
			this.verified.add(interpreter.command);
			return undefined;
		}
		return result.message;
	}

	forget(): void {
		this.verified.clear();
	}
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
	const ext = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
	if (!ext) {
		return undefined;
	}
	return ext.isActive ? ext.exports : ext.activate();
}

function run(command: string, args: string[]): Promise<RunResult> {
	return new Promise((resolve) => {
		execFile(command, args, { timeout: 30_000, windowsHide: true }, (error, stdout, stderr) => {
			const e = error as (NodeJS.ErrnoException & { code?: number | string }) | null;
			resolve({
				code: e ? (typeof e.code === 'number' ? e.code : null) : 0,
				stdout: String(stdout),
				stderr: String(stderr),
				errorCode: e && typeof e.code === 'string' ? e.code : undefined,
			});
		});
	});
}

/** The file of the active editor: a text editor's document, or a custom editor's (a model). */
function editorFile(): string | undefined {
	const doc = vscode.window.activeTextEditor?.document;
	if (doc && doc.uri.scheme === 'file') {
		return doc.uri.fsPath;
	}
	const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
	if (input instanceof vscode.TabInputCustom || input instanceof vscode.TabInputText) {
		return input.uri.fsPath;
	}
	return undefined;
}

/** The active editor's file; for a listing kept in the extension's storage, its model. */
function activeFile(listings: ListingFiles): string | undefined {
	const file = editorFile();
	return file ? (listings.modelOf(file) ?? file) : undefined;
}

/** Whether the listing of `model` names the Python file `file` as a node's source. */
function modelNamesSource(listings: ListingFiles, model: string, file: string): boolean {
	for (const listing of [listings.movedListing(model), listingPathFor(model)]) {
		try {
			if (listing && listingNamesSource(fs.readFileSync(listing, 'utf8'), file)) {
				return true;
			}
		} catch {
			// no listing there
		}
	}
	return false;
}

/** The model a command is about: its argument (from the explorer), else the active editor's. */
function targetModel(listings: ListingFiles, uri?: vscode.Uri): string | undefined {
	const file = uri instanceof vscode.Uri ? uri.fsPath : activeFile(listings);
	if (!file || !(file.endsWith(MODEL_EXT) || file.endsWith(LISTING_EXT))) {
		return undefined;
	}
	return modelPathFor(file);
}

async function startModel(listings: ListingFiles, uri: vscode.Uri | undefined, noDebug: boolean): Promise<void> {
	const model = targetModel(listings, uri);
	if (!model) {
		void vscode.window.showErrorMessage(`graph-dap: select an .onnx model to ${noDebug ? 'run' : 'debug'}.`);
		return;
	}
	const folder = vscode.workspace.getWorkspaceFolder(vscode.Uri.file(model));
	await vscode.debug.startDebugging(folder, configurationForModel(model, noDebug), { noDebug });
}

class ConfigurationProvider implements vscode.DebugConfigurationProvider {
	constructor(
		private readonly interpreter: InterpreterService,
		private readonly listings: ListingFiles,
		private readonly recentModel: () => string | undefined,
	) {}

	/** F5 without a launch.json: a configuration for the model or listing in the active editor. */
	resolveDebugConfiguration(_folder: vscode.WorkspaceFolder | undefined, config: vscode.DebugConfiguration): vscode.ProviderResult<vscode.DebugConfiguration> {
		const file = activeFile(this.listings);
		const recentModel = this.recentModel();
		const activeFileIsModelSource = !!file?.endsWith('.py') && !!recentModel && modelNamesSource(this.listings, recentModel, file);
		const r = resolveConfiguration(config as Partial<GraphDapConfiguration>, { activeFile: file, recentModel, activeFileIsModelSource });
		if (r.kind === 'error') {
			void vscode.window.showErrorMessage(`graph-dap: ${r.message}`);
			return undefined;
		}
		return r.config;
	}

	/** After substitution: check the attributes and that the adapter can start. */
	async resolveDebugConfigurationWithSubstitutedVariables(
		_folder: vscode.WorkspaceFolder | undefined,
		config: vscode.DebugConfiguration,
	): Promise<vscode.DebugConfiguration | undefined> {
		const r = finishConfiguration(config as GraphDapConfiguration);
		if (r.kind === 'error') {
			void vscode.window.showErrorMessage(`graph-dap: ${r.message}`);
			return undefined;
		}
		const target = r.config.model ?? r.config.program;  // a program launch: the models are the program's
		const moved = r.config.model ? this.listings.movedListing(r.config.model) : undefined;
		if (moved && r.config.listingPath === undefined) {
			r.config.listingPath = moved;
		}
		if (r.config.debugServer === undefined) {
			const interpreter = await this.interpreter.get(target ? vscode.Uri.file(target) : undefined);
			const problem = await this.interpreter.problem(interpreter);
			if (problem) {
				void vscode.window.showErrorMessage(problem, 'Open Settings').then((choice) => {
					if (choice) {
						void vscode.commands.executeCommand('workbench.action.openSettings', 'graphDap.python');
					}
				});
				return undefined;
			}
		}
		return r.config as vscode.DebugConfiguration;
	}
}

/** The Run and Debug view's list: one configuration per model in the workspace. */
class DynamicConfigurations implements vscode.DebugConfigurationProvider {
	async provideDebugConfigurations(folder: vscode.WorkspaceFolder | undefined): Promise<vscode.DebugConfiguration[]> {
		const pattern = folder ? new vscode.RelativePattern(folder, '**/*.onnx') : '**/*.onnx';
		const models = await vscode.workspace.findFiles(pattern, '**/node_modules/**', 20);
		return models.map((uri) => configurationForModel(uri.fsPath) as vscode.DebugConfiguration);
	}
}

/** Started ahead (see warmAdapter.ts), after the extension activates and after each session, so as not to slow either. */
const WARM_AFTER_ACTIVATION_MS = 2000;
const WARM_AFTER_SESSION_MS = 1000;

class AdapterFactory implements vscode.DebugAdapterDescriptorFactory {
	private last: { command: string; args: string[]; cwd: string | undefined } | undefined;

	constructor(
		private readonly interpreter: InterpreterService,
		private readonly warm: WarmAdapters,
	) {}

	/** Start the adapter of the next session ahead, as the last session's was started (a model launch's). */
	prepareNext(delayMs: number): void {
		if (this.last) {
			this.warm.prepare(this.last.command, this.last.args, this.last.cwd, delayMs);
		}
	}

	async createDebugAdapterDescriptor(session: vscode.DebugSession): Promise<vscode.DebugAdapterDescriptor> {
		const config = session.configuration as GraphDapConfiguration;
		const target = config.model ?? config.program;
		const python = (await this.interpreter.get(target ? vscode.Uri.file(target) : undefined)).command;
		const d = describeAdapter(config, python);
		if (d.kind === 'server') {
			return new vscode.DebugAdapterServer(d.port, d.host);
		}
		const cwd = session.workspaceFolder?.uri.fsPath ?? (target ? path.dirname(target) : undefined);
		this.last = { command: d.command, args: d.args, cwd };
		if (!d.env) {
			const started = this.warm.take(d.command, d.args, cwd);
			if (started) {
				return started;
			}
		}
		const env = d.env ? { ...(process.env as Record<string, string>), ...d.env } : undefined;
		return new vscode.DebugAdapterExecutable(d.command, d.args, cwd || env ? { cwd, env } : undefined);
	}
}

async function viewTensor(tensors: TensorViews, ctx?: VariablesContext): Promise<void> {
	const session = vscode.debug.activeDebugSession;
	if (!session || session.type !== DEBUG_TYPE) {
		void vscode.window.showErrorMessage('graph-dap: the tensor viewer needs a running ONNX Graph debug session.');
		return;
	}
	let name = ctx ? tensorNameFromContext(ctx) : undefined;
	if (!name) {
		name = await vscode.window.showInputBox({
			title: 'View Tensor',
			prompt: 'The name of a value (a tensor) of the model',
			value: wordAtCursor(),
			ignoreFocusOut: true,
		});
	}
	if (name) {
		tensors.show(name, session);
	}
}

/** The value name under the cursor in a listing (names may hold `/ . : -`). */
function wordAtCursor(): string | undefined {
	const editor = vscode.window.activeTextEditor;
	if (!editor || editor.document.languageId !== 'onnx-listing') {
		return undefined;
	}
	const range = editor.document.getWordRangeAtPosition(editor.selection.active, /[A-Za-z0-9_/.:\-]+/);
	return range ? editor.document.getText(range).replace(/:$/, '') : undefined;
}
