/**
 * Launch configuration resolution for the `graph-dap` debugger, independent of VS Code's API
 * so that it can be unit-tested: the extension passes in what it knows about the editor.
 */

/** The debug type this extension contributes. */
export const DEBUG_TYPE = 'graph-dap';

/** The adapter's exception filters (its `exceptionBreakpointFilters`), as `breakOn` names them. */
export const EXCEPTION_FILTERS = ['nan', 'inf', 'error', 'mismatch'];

/** File extension of a model and of its graph listing. */
export const MODEL_EXT = '.onnx';
export const LISTING_EXT = '.onnxtxt';

/** The launch attributes the adapter understands (see package.json `configurationAttributes`). */
export interface GraphDapConfiguration {
	type: string;
	request: string;
	name: string;
	model?: string;
	/** A .npz, .npy or test-data folder; or input name -> .npy path. */
	inputs?: string | Record<string, string>;
	dims?: Record<string, number>;
	stopOnEntry?: boolean;
	providers?: string[];
	skipConstants?: boolean;
	memoryBudgetMB?: number;
	worker?: string;
	token?: string;
	cwd?: string;
	python?: string;
	debugServer?: number;
	/** Where the listing is when it is not `<model>.onnxtxt` beside the model. */
	listingPath?: string;
	noDebug?: boolean;
	/** Exception filters turned on by the launch itself (nan, inf, error, mismatch), besides the Breakpoints view's. */
	breakOn?: string[];
	/** Nodes (globs or op:TYPE) whose Inf the inf filter ignores, besides the filter's condition. */
	infExclude?: string[];
	/** Nodes (globs or op:TYPE) whose NaN the nan filter ignores, besides the filter's condition. */
	nanExclude?: string[];
	/** A Python program to debug together with the models it runs (mixed mode; `model` is then not needed). */
	program?: string;
	/** Or a module, as `python -m` runs it. */
	module?: string;
	args?: string[];
	env?: Record<string, string | null>;
	/** Mixed mode: stop at the entry of every InferenceSession.run call. */
	stopOnSessionRun?: boolean;
	[key: string]: unknown;
}

/** What the extension knows about the user's context when F5 is pressed. */
export interface EditorContext {
	/** Path of the active editor's file (a model, its listing, or anything else), if any. */
	activeFile?: string;
	/** The model (or listing) of the last model editor that was active: F5 from another file, such as the model's Python source, debugs it. */
	recentModel?: string;
	/** The active file is a Python file that the recent model's listing names as its source (F5 then debugs the model, not the script). */
	activeFileIsModelSource?: boolean;
}

/** Whether a listing names the Python file `pyPath` as a node's source (`# model.py:25` after a node). */
export function listingNamesSource(listing: string, pyPath: string): boolean {
	const base = pyPath.split(/[\\/]/).pop() ?? pyPath;
	return listing.includes(`# ${base}:`) || listing.includes(`/${base}:`);
}

/** The model F5 is about: the active editor's, else the one last active. */
function contextModel(ctx: EditorContext): string | undefined {
	const file = isModelOrListing(ctx.activeFile) ? ctx.activeFile : ctx.recentModel;
	return isModelOrListing(file) ? modelPathFor(file) : undefined;
}

/** The outcome of resolving a configuration: go on with it, or stop with a message. */
export type Resolution =
	| { kind: 'ok'; config: GraphDapConfiguration }
	| { kind: 'error'; message: string };

/** `model.onnxtxt` -> `model.onnx`; any other path is returned as it is. */
export function modelPathFor(file: string): string {
	return file.endsWith(LISTING_EXT) ? file.slice(0, -LISTING_EXT.length) + MODEL_EXT : file;
}

/** `model.onnx` -> `model.onnxtxt` (the listing beside the model, the file the adapter reports). */
export function listingPathFor(model: string): string {
	return (model.endsWith(MODEL_EXT) ? model.slice(0, -MODEL_EXT.length) : model) + LISTING_EXT;
}

/** Whether a configuration debugs a Python program (mixed mode) rather than one model. */
export function isProgramLaunch(config: Partial<GraphDapConfiguration>): boolean {
	return (typeof config.program === 'string' && config.program !== '') || (typeof config.module === 'string' && config.module !== '');
}

/** A configuration for the Python program at `program`: the program, and the models it runs. */
export function configurationForProgram(program: string, noDebug = false): GraphDapConfiguration {
	const config: GraphDapConfiguration = { type: DEBUG_TYPE, request: 'launch', name: `Debug ${baseName(program)} with its models`, program };
	if (noDebug) {
		config.noDebug = true;
	}
	return config;
}

/** Whether a path names a model or a model's listing. */
export function isModelOrListing(file: string | undefined): file is string {
	return !!file && (file.endsWith(MODEL_EXT) || file.endsWith(LISTING_EXT));
}

function baseName(file: string): string {
	const parts = file.split(/[\\/]/);
	return parts[parts.length - 1];
}

/** A configuration for the model at `model`, as F5 or the explorer's commands make it. */
export function configurationForModel(model: string, noDebug = false): GraphDapConfiguration {
	const config: GraphDapConfiguration = {
		type: DEBUG_TYPE,
		request: 'launch',
		name: `${noDebug ? 'Run' : 'Debug'} ${baseName(model)}`,
		model,
	};
	if (noDebug) {
		config.noDebug = true;
	}
	return config;
}

/**
 * First step (before variable substitution), like mock-debug's `resolveDebugConfiguration`:
 * an empty configuration (F5 without a launch.json) becomes one for the model or listing
 * in the active editor.
 */
export function resolveConfiguration(raw: Partial<GraphDapConfiguration>, ctx: EditorContext): Resolution {
	const empty = !raw.type && !raw.request && !raw.name;
	if (empty) {
		if (ctx.activeFile?.endsWith('.py') && !(ctx.recentModel && ctx.activeFileIsModelSource)) {
			return { kind: 'ok', config: configurationForProgram(ctx.activeFile, !!raw.noDebug) };
		}
		const model = contextModel(ctx);
		if (!model) {
			return {
				kind: 'error',
				message: 'Open an ONNX model (.onnx) or its graph listing (.onnxtxt) to debug it, or add a "graph-dap" configuration to launch.json.',
			};
		}
		return { kind: 'ok', config: configurationForModel(model, !!raw.noDebug) };
	}
	const config = { ...raw, type: raw.type ?? DEBUG_TYPE, request: raw.request ?? 'launch', name: raw.name ?? 'Debug ONNX model' } as GraphDapConfiguration;
	if (config.request !== 'launch') {
		return { kind: 'error', message: `graph-dap supports only "request": "launch", not "${config.request}".` };
	}
	if (isProgramLaunch(config)) {
		return { kind: 'ok', config };
	}
	if (config.model === undefined || config.model === '') {
		const model = contextModel(ctx);
		if (model) {
			config.model = model;
		} else {
			return { kind: 'error', message: 'The launch configuration has no "model": set it to the path of an .onnx file (or give "program": a Python script that runs models).' };
		}
	}
	return { kind: 'ok', config };
}

/**
 * Second step (after variable substitution): `${file}` on a listing names the model, and the
 * attributes have the types the adapter expects. Returns the first problem found, in words.
 */
export function finishConfiguration(config: GraphDapConfiguration): Resolution {
	const out: GraphDapConfiguration = { ...config };
	if (isProgramLaunch(out)) {
		if (out.program !== undefined && out.module !== undefined) {
			return { kind: 'error', message: 'Give either "program" (a script) or "module", not both.' };
		}
		const problem = checkProgramTypes(out) ?? checkTypes(out);
		return problem ? { kind: 'error', message: problem } : { kind: 'ok', config: out };
	}
	if (typeof out.model !== 'string' || out.model === '') {
		return { kind: 'error', message: 'The launch configuration has no "model": set it to the path of an .onnx file (or give "program": a Python script that runs models).' };
	}
	out.model = modelPathFor(out.model);
	if (typeof out.providers === 'string') {
		out.providers = [out.providers];
	}
	if (typeof out.debugServer === 'string' && /^\d+$/.test(out.debugServer)) {
		out.debugServer = Number(out.debugServer);
	}
	const problem = checkTypes(out);
	return problem ? { kind: 'error', message: problem } : { kind: 'ok', config: out };
}

function checkTypes(c: GraphDapConfiguration): string | undefined {
	const want = (key: string, ok: boolean, what: string) => (ok ? undefined : `"${key}" must be ${what}, got ${JSON.stringify(c[key])}.`);
	const isInt = (v: unknown) => typeof v === 'number' && Number.isInteger(v);
	const has = (key: string) => c[key] !== undefined;
	return (
		(has('inputs') ? want('inputs', typeof c.inputs === 'string' || (isPlainObject(c.inputs) && Object.values(c.inputs).every((v) => typeof v === 'string')), 'a path (.npz, .npy or a test-data folder) or an object of input names to .npy paths') : undefined) ??
		(has('dims') ? want('dims', isPlainObject(c.dims) && Object.values(c.dims!).every((v) => isInt(v) && v >= 0), 'an object of dimension names to non-negative integers') : undefined) ??
		(has('stopOnEntry') ? want('stopOnEntry', typeof c.stopOnEntry === 'boolean', 'true or false') : undefined) ??
		(has('providers') ? want('providers', Array.isArray(c.providers) && c.providers.every((p) => typeof p === 'string'), 'a list of execution provider names') : undefined) ??
		(has('skipConstants') ? want('skipConstants', typeof c.skipConstants === 'boolean', 'true or false') : undefined) ??
		(has('memoryBudgetMB') ? want('memoryBudgetMB', typeof c.memoryBudgetMB === 'number' && c.memoryBudgetMB > 0, 'a positive number') : undefined) ??
		(has('worker') ? want('worker', typeof c.worker === 'string' && /^.+:\d+$/.test(c.worker), '"HOST:PORT"') : undefined) ??
		(has('token') ? want('token', typeof c.token === 'string', 'a string') : undefined) ??
		(has('cwd') ? want('cwd', typeof c.cwd === 'string', 'a folder path') : undefined) ??
		(has('python') ? want('python', typeof c.python === 'string', "a Python interpreter's path") : undefined) ??
		(has('listingPath') ? want('listingPath', typeof c.listingPath === 'string' && c.listingPath.endsWith(LISTING_EXT), `a path ending in ${LISTING_EXT}`) : undefined) ??
		(has('debugServer') ? want('debugServer', isInt(c.debugServer) && c.debugServer! > 0 && c.debugServer! < 65536, 'a port number') : undefined) ??
		(has('breakOn') ? want('breakOn', Array.isArray(c.breakOn) && c.breakOn.every((f) => EXCEPTION_FILTERS.includes(f)), `a list of exception filters (${EXCEPTION_FILTERS.join(', ')})`) : undefined) ??
		(has('infExclude') ? want('infExclude', Array.isArray(c.infExclude) && c.infExclude.every((p) => typeof p === 'string'), 'a list of node globs or op:TYPE') : undefined) ??
		(has('nanExclude') ? want('nanExclude', Array.isArray(c.nanExclude) && c.nanExclude.every((p) => typeof p === 'string'), 'a list of node globs or op:TYPE') : undefined)
	);
}

function checkProgramTypes(c: GraphDapConfiguration): string | undefined {
	const want = (key: string, ok: boolean, what: string) => (ok ? undefined : `"${key}" must be ${what}, got ${JSON.stringify(c[key])}.`);
	const has = (key: string) => c[key] !== undefined;
	return (
		(has('args') ? want('args', Array.isArray(c.args) && c.args.every((a) => typeof a === 'string'), 'a list of strings') : undefined) ??
		(has('env') ? want('env', isPlainObject(c.env) && Object.values(c.env!).every((v) => typeof v === 'string' || v === null), 'an object of names to strings') : undefined) ??
		(has('stopOnSessionRun') ? want('stopOnSessionRun', typeof c.stopOnSessionRun === 'boolean', 'true or false') : undefined) ??
		(has('infExclude') ? want('infExclude', Array.isArray(c.infExclude) && c.infExclude.every((p) => typeof p === 'string'), 'a list of node globs or op:TYPE') : undefined) ??
		(has('nanExclude') ? want('nanExclude', Array.isArray(c.nanExclude) && c.nanExclude.every((p) => typeof p === 'string'), 'a list of node globs or op:TYPE') : undefined)
	);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
	return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** How VS Code should reach the adapter for a resolved configuration. */
export type AdapterDescriptor =
	| { kind: 'server'; port: number; host: string }
	| { kind: 'executable'; command: string; args: string[]; env?: Record<string, string> };

/**
 * The adapter for `config`: a running server when `debugServer` is set, else `python -m graph_dap.adapter`
 * (for a program launch with GRAPH_DAP_PROGRAM=1, so that it lists the Python exception filters at initialize).
 */
export function describeAdapter(config: Partial<GraphDapConfiguration>, python: string): AdapterDescriptor {
	if (typeof config.debugServer === 'number') {
		return { kind: 'server', port: config.debugServer, host: '127.0.0.1' };
	}
	const adapter: AdapterDescriptor = { kind: 'executable', command: python, args: ['-m', 'graph_dap.adapter'] };
	if (isProgramLaunch(config)) {
		adapter.env = { GRAPH_DAP_PROGRAM: '1' };
	}
	return adapter;
}
