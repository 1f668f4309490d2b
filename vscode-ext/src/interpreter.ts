/**
 * Which Python runs the adapter, and whether graph_dap is importable there. Independent of
 * VS Code's API: the extension passes in the setting and a way to reach the Python extension.
 */

/** The part of the Python extension's API (ms-python.python) this extension uses. */
export interface PythonExtensionApi {
	environments?: {
		getActiveEnvironmentPath(resource?: unknown): { id?: string; path: string } | undefined;
		resolveEnvironment(env: { id?: string; path: string } | string): Promise<{ executable?: { uri?: { fsPath: string } } } | undefined>;
	};
	settings?: {
		getExecutionDetails?(resource?: unknown): { execCommand?: string[] } | undefined;
	};
}

/** Where the interpreter came from, for messages. */
export type InterpreterSource = 'setting graphDap.python' | 'Python extension' | 'default';

export interface Interpreter {
	command: string;
	source: InterpreterSource;
}

export const DEFAULT_PYTHON = 'python3';

/** Expands `~` and `${workspaceFolder}` in the setting's value. */
export function expandSetting(value: string, env: { home?: string; workspaceFolder?: string }): string {
	let out = value.trim();
	if (env.home && (out === '~' || out.startsWith('~/'))) {
		out = env.home + out.slice(1);
	}
	if (env.workspaceFolder) {
		out = out.split('${workspaceFolder}').join(env.workspaceFolder);
	}
	return out;
}

/**
 * The interpreter, in order: the setting `graphDap.python` when set; the interpreter chosen in
 * the Python extension when it is installed and has one; else `python3`.
 */
export async function chooseInterpreter(
	setting: string | undefined,
	pythonApi: () => Promise<PythonExtensionApi | undefined>,
	resource?: unknown,
): Promise<Interpreter> {
	if (setting && setting.trim() !== '') {
		return { command: setting.trim(), source: 'setting graphDap.python' };
	}
	let api: PythonExtensionApi | undefined;
	try {
		api = await pythonApi();
	} catch {
		api = undefined;
	}
	const fromExtension = api ? await interpreterFromPythonExtension(api, resource) : undefined;
	if (fromExtension) {
		return { command: fromExtension, source: 'Python extension' };
	}
	return { command: DEFAULT_PYTHON, source: 'default' };
}

async function interpreterFromPythonExtension(api: PythonExtensionApi, resource: unknown): Promise<string | undefined> {
	try {
		const envs = api.environments;
		if (envs) {
			const active = envs.getActiveEnvironmentPath(resource);
			if (active) {
				const resolved = await envs.resolveEnvironment(active);
				const exe = resolved?.executable?.uri?.fsPath;
				if (exe) {
					return exe;
				}
			}
		}
		const exec = api.settings?.getExecutionDetails?.(resource)?.execCommand;
		if (exec && exec.length > 0 && exec[0]) {
			return exec[0];
		}
	} catch {
		// A broken or still-loading Python extension: fall back to the default.
	}
	return undefined;
}

/** What running a short command gave. */
export interface RunResult {
	/** Exit code; null when the process could not start or was killed. */
	code: number | null;
	stdout: string;
	stderr: string;
	/** e.g. 'ENOENT' when the interpreter does not exist. */
	errorCode?: string;
}

export type Runner = (command: string, args: string[]) => Promise<RunResult>;

/** Exit code of the probe when graph_dap.adapter cannot be found. */
const NOT_FOUND = 3;
const PROBE = [
	'-c',
	`import importlib.util, sys\ntry:\n    ok = importlib.util.find_spec("graph_dap.adapter") is not None\nexcept Exception:\n    ok = False\nsys.exit(0 if ok else ${NOT_FOUND})`,
];

export type Availability = { ok: true } | { ok: false; message: string };

/** Whether `python -m graph_dap.adapter` can run with this interpreter; if not, how to fix it. */
export async function checkGraphDap(interpreter: Interpreter, run: Runner): Promise<Availability> {
	const py = interpreter.command;
	const where = `the Python interpreter "${py}" (from the ${interpreter.source})`;
	const how =
		`Install it there with \`"${py}" -m pip install -e PATH/TO/graph-dap\` (the folder with graph-dap's pyproject.toml), ` +
		'or point the setting "graphDap.python" at an interpreter that has it.';
	const result = await run(py, PROBE);
	if (result.errorCode === 'ENOENT') {
		return { ok: false, message: `graph-dap: ${where} was not found. Install Python 3.10 or newer, or set "graphDap.python" to an interpreter's path.` };
	}
	if (result.code === 0) {
		return { ok: true };
	}
	if (result.code === NOT_FOUND) {
		return { ok: false, message: `graph-dap: the package graph_dap is not importable by ${where}. ${how}` };
	}
	const detail = (result.stderr || result.stdout).trim().split('\n').slice(-1)[0] ?? '';
	return { ok: false, message: `graph-dap: ${where} failed to start (${detail || `exit ${result.code}`}). ${how}` };
}
