// Builds the extension with esbuild: dist/extension.js (the extension, vscode external) and
// dist/webview.js (the tensor viewer's page) and the graph view's renderer (below). With --tests: the unit tests and the pure modules
// they cover, one file each, into out/ (node --test runs them). With --watch: rebuilds on change.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const common = { bundle: true, sourcemap: true, logLevel: 'warning', absWorkingDir: root };

// The graph view's renderer: one bundle for the webview and for the page `graph-dap graph` writes,
// which the Python package ships (graph_dap/runtime/tools/graphview/graphview.js, committed: a pip
// install has no Node to build it). Minified, no source map, so that the build is the same file each time.
const graphView = {
	bundle: true,
	logLevel: 'warning',
	absWorkingDir: root,
	entryPoints: ['src/graphview/main.ts'],
	outfile: '../graph_dap/runtime/tools/graphview/graphview.js',
	platform: 'browser',
	format: 'iife',
	target: 'es2022',
	minify: true,
	legalComments: 'none',
};

const builds = args.has('--tests')
	? [
			{
				...common,
				entryPoints: readdirSync(join(root, 'src', 'test'))
					.filter((f) => f.endsWith('.test.ts'))
					.map((f) => `src/test/${f}`),
				outdir: 'out/test',
				platform: 'node',
				format: 'cjs',
				target: 'node20',
				external: ['vscode', 'vscode-textmate', 'vscode-oniguruma'],
			},
		]
	: [
			{ ...common, entryPoints: ['src/extension.ts'], outfile: 'dist/extension.js', platform: 'node', format: 'cjs', target: 'node20', external: ['vscode'] },
			{ ...common, entryPoints: ['src/webview/main.ts'], outfile: 'dist/webview.js', platform: 'browser', format: 'iife', target: 'es2022' },
			graphView,
		];

if (args.has('--watch')) {
	for (const b of builds) {
		await (await esbuild.context(b)).watch();
	}
} else {
	await Promise.all(builds.map((b) => esbuild.build(b)));
	if (!args.has('--tests')) {
		// The extension's webview loads the same bundle from dist/.
		mkdirSync(join(root, 'dist'), { recursive: true });
		copyFileSync(join(root, graphView.outfile), join(root, 'dist', 'graphview.js'));
	}
}
