#!/usr/bin/env node
// The extension end to end in a real VS Code: code-server with the built .vsix, driven in
// Debian's Chromium by playwright-core. Installs what it needs first (scripts/setup-e2e.sh,
// idempotent), then runs the scenarios of scripts/e2e/scenarios/ in the order of their file names,
// in one workbench (each starts where the one before left it): open the example model (its listing shows),
// the listing's language server, a gutter breakpoint, F5 without a launch.json, paused at the node, the live
// hover, a step, the tensor viewer, continue to the end; "Run ONNX Model" from the explorer, a breakpoint inside
// a Loop's body, a breakpoint on a line of a PyTorch model's Python source, "Scan Inputs...", a Python program
// launched with "program", a "debugServer" launch, the graph view on a PaddleOCR-style detector; and last the DAP traffic that VS Code really sent and
// received (the extension's tracker writes it to an output channel, which lands on disk).
//
// A scenario is a module (NN-name.mjs) exporting `name`, `run(ctx)` and optionally `prepare({ws, tmp})` (the
// files it needs in the workspace, written before code-server starts), `soft` ('failures': a Failure it
// raises is recorded and the next scenario runs; 'errors': any error is) and `recover(ctx)` (after a soft
// failure, to leave the workbench usable). `ctx` holds page, ws, tmp, server, shot(name), visible(selector),
// text(selector) and what scenarios leave for later ones (listingText). The shared helpers: e2e/helpers.mjs.
//
// Screenshots go to e2e-artifacts/. Exit status 0 when every check passed, 1 otherwise.
// Options: --no-setup, --no-build, --keep (keep the temp folder), --until=NAME (stop after the scenario of
// that name, e.g. listing or breakpoint: for a machine without the adapter).
// Environment: GRAPH_DAP_PYTHON (default python3), GRAPH_DAP_E2E_CACHE (see setup-e2e.sh).

import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import { Failure, artifacts, check, checks, exampleModel, fail, freePort, here, log, python, readDapLog, repo, run, sleep, until_ } from './e2e/helpers.mjs';

const opts = new Set(process.argv.slice(2).filter((a) => !a.startsWith('--until=')));
const until = (process.argv.find((a) => a.startsWith('--until=')) ?? '--until=end').slice(8);
const scenarioDir = join(here, 'scripts', 'e2e', 'scenarios');

// --- setup ------------------------------------------------------------------------------
function setup() {
	if (!opts.has('--no-setup')) {
		log('setup (scripts/setup-e2e.sh; skips what is done)');
		run('bash', [join(here, 'scripts', 'setup-e2e.sh')]);
	}
	const cache = process.env.GRAPH_DAP_E2E_CACHE || join(process.env.HOME || tmpdir(), '.cache', 'graph-dap-e2e');
	const env = {};
	for (const line of readFileSync(join(cache, 'env.sh'), 'utf8').split('\n')) {
		const m = /^export (\w+)="(.*)"$/.exec(line);
		if (m) env[m[1]] = m[2];
	}
	if (!env.GRAPH_DAP_CODE_SERVER || !existsSync(env.GRAPH_DAP_CODE_SERVER)) fail(`code-server is not installed in ${cache}: run scripts/setup-e2e.sh`);
	if (!opts.has('--no-build')) {
		log('build and package the extension');
		run('npm', ['run', '--silent', 'package'], { cwd: here, stdio: ['ignore', 'ignore', 'inherit'] });
	}
	const vsix = join(here, 'dist', 'graph-dap.vsix');
	if (!existsSync(vsix)) fail(`${vsix} is missing: run npm run package`);
	const probe = spawnSync(python, ['-c', 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("graph_dap") else 3)']);
	if (probe.status !== 0) fail(`graph_dap is not importable by ${python}: pip install -e ${repo} (or set GRAPH_DAP_PYTHON)`);
	const adapter = spawnSync(python, ['-c', 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("graph_dap.adapter.__main__") else 3)']);
	const hasAdapter = adapter.status === 0;
	if (!hasAdapter && until === 'end') fail(`${python} has graph_dap but no graph_dap/adapter/__main__.py yet: the adapter is needed (or run with --until=breakpoint)`);
	if (!existsSync(exampleModel)) fail(`the example model ${exampleModel} is missing (examples/make_example.py builds it)`);
	return { codeServer: env.GRAPH_DAP_CODE_SERVER, nodeBin: env.GRAPH_DAP_NODE24_BIN, vsix };
}

// --- code-server ------------------------------------------------------------------------
function quietSettings(extra) {
	return {
		'workbench.startupEditor': 'none',
		'workbench.secondarySideBar.defaultVisibility': 'hidden',
		'chat.disableAIFeatures': true,
		'workbench.tips.enabled': false,
		'telemetry.telemetryLevel': 'off',
		'extensions.autoCheckUpdates': false,
		'extensions.autoUpdate': false,
		'update.mode': 'none',
		'security.workspace.trust.enabled': false,
		'window.restoreWindows': 'none',
		'workbench.enableExperiments': false,
		'debug.openDebug': 'openOnDebugBreak',
		// No animations and no blinking cursor: the browser paints only when something changes.
		'workbench.reduceMotion': 'on',
		'editor.cursorBlinking': 'solid',
		'editor.smoothScrolling': false,
		'workbench.list.smoothScrolling': false,
		...extra,
	};
}

async function startCodeServer(tools, tmp, ws) {
	const dirs = { data: join(tmp, 'data'), ext: join(tmp, 'extensions'), xdg: join(tmp, 'xdg') };
	Object.values(dirs).forEach((d) => mkdirSync(d, { recursive: true }));
	mkdirSync(join(dirs.data, 'User'), { recursive: true });
	writeFileSync(join(dirs.data, 'User', 'settings.json'), JSON.stringify(quietSettings({ 'graphDap.python': python, 'graphDap.trace': true }), null, 2));
	const port = await freePort();
	const cfg = join(tmp, 'code-server.yaml');
	writeFileSync(cfg, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
	const env = {
		...process.env,
		PATH: `${tools.nodeBin}:${process.env.PATH}`,
		XDG_CONFIG_HOME: join(dirs.xdg, 'config'),
		XDG_DATA_HOME: join(dirs.xdg, 'data'),
		XDG_CACHE_HOME: join(dirs.xdg, 'cache'),
	};
	const common = ['--config', cfg, '--user-data-dir', dirs.data, '--extensions-dir', dirs.ext];
	log('install the .vsix into code-server');
	run(tools.codeServer, [...common, '--install-extension', tools.vsix], { env, stdio: ['ignore', 'ignore', 'inherit'] });
	const out = join(artifacts, 'code-server.log');
	const fd = openSync(out, 'w');
	// detached: its own session and process group (setsid), killed whole at the end.
	const child = spawn(
		tools.codeServer,
		[
			...common,
			'--bind-addr',
			`127.0.0.1:${port}`,
			'--auth',
			'none',
			'--disable-telemetry',
			'--disable-update-check',
			'--disable-workspace-trust',
			'--reconnection-grace-time',
			'5',
			ws,
		],
		{ env, detached: true, stdio: ['ignore', fd, fd] },
	);
	const server = { child, port, dirs, exited: false };
	child.on('exit', () => (server.exited = true));
	await until_('code-server /healthz', async () => {
		if (server.exited) fail(`code-server exited; see ${out}`);
		const r = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
		return r?.ok;
	}, 60000);
	log(`code-server is up on port ${port}`);
	return server;
}

async function stopProcessGroup(child) {
	if (!child || child.exitCode !== null) return;
	try {
		process.kill(-child.pid, 'SIGTERM');
	} catch {
		return;
	}
	for (let i = 0; i < 20 && child.exitCode === null; i++) await sleep(100);
	try {
		process.kill(-child.pid, 'SIGKILL');
	} catch {
		// already gone
	}
}

// --- the scenarios ----------------------------------------------------------------------
/** The scenario modules, in the order of their file names, each one's files written into the workspace. */
async function loadScenarios() {
	const files = readdirSync(scenarioDir).filter((f) => /^\d+-[\w-]+\.mjs$/.test(f)).sort();
	const scenarios = [];
	for (const file of files) {
		const scenario = await import(pathToFileURL(join(scenarioDir, file)).href);
		if (typeof scenario.run !== 'function' || typeof scenario.name !== 'string') fail(`scripts/e2e/scenarios/${file} exports no name and run(ctx)`);
		scenarios.push(scenario);
	}
	if (until !== 'end' && !scenarios.some((s) => s.name === until)) fail(`--until=${until}: no scenario is named so (${scenarios.map((s) => s.name).join(', ')})`);
	return scenarios;
}

async function runScenarios(scenarios, { page, ws, tmp, server }) {
	let n = 0;
	const ctx = {
		page,
		ws,
		tmp,
		server,
		shot: async (name) => {
			const file = join(artifacts, `${String(++n).padStart(2, '0')}-${name}.png`);
			await page.screenshot({ path: file });
			log(`screenshot ${file}`);
		},
		visible: (selector, options = {}) => page.locator(selector, options).first().waitFor({ state: 'visible', timeout: options.timeout ?? 30000 }),
		text: async (selector) => (await page.locator(selector).allInnerTexts()).join('\n'),
	};
	await page.goto(`http://127.0.0.1:${server.port}/?folder=${encodeURIComponent(ws)}`);
	await ctx.visible('.monaco-workbench .explorer-folders-view', { timeout: 60000 });
	log('the workbench is ready');
	await sleep(1000);
	for (const scenario of scenarios) {
		try {
			await scenario.run(ctx);
		} catch (e) {
			const recorded = scenario.soft === 'errors' || (scenario.soft === 'failures' && e instanceof Failure);
			if (!recorded) throw e;
			check(false, scenario.soft === 'errors' ? e.message.split('\n')[0] : e.message);
			await ctx.shot(`${scenario.name}-failure`);
			await scenario.recover?.(ctx);
		}
		if (scenario.name === until) return;
	}
}

// --- main -------------------------------------------------------------------------------
async function main() {
	rmSync(artifacts, { recursive: true, force: true });
	mkdirSync(artifacts, { recursive: true });
	const tools = setup();
	const tmp = mkdtempSync(join(tmpdir(), 'graph-dap-e2e-'));
	const ws = join(tmp, 'workspace');
	mkdirSync(ws);
	copyFileSync(exampleModel, join(ws, 'nan_demo.onnx'));
	const scenarios = await loadScenarios();
	for (const scenario of scenarios) scenario.prepare?.({ ws, tmp });
	let server;
	let context;
	try {
		server = await startCodeServer(tools, tmp, ws);
		const { chromium } = await import('playwright-core');
		const home = join(tmp, 'home');
		mkdirSync(home);
		context = await chromium.launchPersistentContext(join(tmp, 'chromium'), {
			executablePath: '/usr/bin/chromium',
			headless: true,
			viewport: { width: 1440, height: 900 },
			reducedMotion: 'reduce',
			env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_CACHE_HOME: join(home, '.cache') },
			args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
		});
		const page = context.pages()[0] ?? (await context.newPage());
		page.setDefaultTimeout(30000);
		try {
			await runScenarios(scenarios, { page, ws, tmp, server });
		} catch (e) {
			await page.screenshot({ path: join(artifacts, 'failure.png') }).catch(() => undefined);
			throw e;
		}
	} catch (e) {
		if (!(e instanceof Failure)) console.error(e);
		check(false, e.message.split('\n')[0]);
	} finally {
		await context?.close().catch(() => undefined);
		await stopProcessGroup(server?.child);
		for (const f of server ? readDapLog(server.dirs.data).files : []) copyFileSync(f, join(artifacts, 'dap-traffic.log'));
		if (!opts.has('--keep')) rmSync(tmp, { recursive: true, force: true });
		else log(`kept ${tmp}`);
	}
	console.log(`e2e: ${checks.passed} passed, ${checks.failed} failed`);
	process.exit(checks.failed === 0 && checks.passed > 0 ? 0 : 1);
}

main();
