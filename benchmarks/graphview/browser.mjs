// The graph view's page (`graph-dap graph --out`) timed in headless Chromium, and Netron on the same
// model when a Netron server is given. Run by benchmarks/bench_graphview.py; prints one JSON object.
//
//   node browser.mjs '{"pages": [{"name", "path", "opens": N, "fps": true}], "netron": [{"name", "url", "fps": true}], "runs": 3}'
//
// open: navigation start -> the first frame drawn (performance.now() at the view's first draw),
// medians over `runs` fresh pages. expand: N groups opened one at a time, breadth first
// (`graphView.open(key)`: the layout and the frame, synchronously), each one's time. fps: every group open, the whole graph fitted,
// then 240 frames of pan and zoom driven by requestAnimationFrame; frame intervals from the
// rAF timestamps (the browser's own), and the view's draw time per frame.
import { createRequire } from 'node:module';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(join(process.cwd(), 'vscode-ext', 'package.json'));
const { chromium } = require('playwright-core');
const config = JSON.parse(process.argv[2]);
const runs = config.runs ?? 3;
const median = (xs) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};
const pct = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null;
};

const home = mkdtempSync(join(tmpdir(), 'gv-bench-'));
const browser = await chromium.launch({
	executablePath: '/usr/bin/chromium',
	headless: true,
	env: { ...process.env, HOME: home },
	args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});

/** 240 frames of pan and zoom; returns the rAF intervals and, for the graph view, its draw times. */
const ANIMATE = `async (drive) => {
	const frames = 240;
	const times = [];
	const draws = [];
	return await new Promise((resolve) => {
		let i = 0;
		const step = (t) => {
			times.push(t);
			const phase = i / frames * 2 * Math.PI;
			if (drive === 'graphview') {
				const v = window.graphView.viewport;
				const f = 1 + 0.02 * Math.sin(phase * 2);
				window.graphView.setViewport({ k: v.k * f, x: v.x + 6 * Math.cos(phase), y: v.y + 6 * Math.sin(phase) });
				draws.push(window.graphView.stats.drawMs);
			} else {
				const target = document.getElementById('canvas') || document.querySelector('svg');
				const r = target.getBoundingClientRect();
				target.dispatchEvent(new WheelEvent('wheel', { deltaY: 8 * Math.sin(phase * 2), ctrlKey: true, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true, cancelable: true }));
				const box = document.getElementById('graph') || document.scrollingElement;
				if (box) { box.scrollLeft += Math.round(4 * Math.cos(phase)); box.scrollTop += Math.round(4 * Math.sin(phase)); }
			}
			if (++i < frames) requestAnimationFrame(step);
			else resolve({ intervals: times.slice(1).map((x, k) => x - times[k]), draws });
		};
		requestAnimationFrame(step);
	});
}`;

async function graphviewPage(spec) {
	const opens = [];
	const result = { name: spec.name };
	for (let r = 0; r < runs; r++) {
		const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
		const errors = [];
		page.on('pageerror', (e) => errors.push(String(e)));
		await page.goto(`file://${spec.path}`, { timeout: 120000 });
		await page.waitForFunction(() => document.body.dataset.drawn === '1', null, { timeout: 120000 });
		const s = await page.evaluate(() => ({ first: window.graphView.stats.firstDrawAt, shown: document.body.dataset.shown }));
		opens.push(s.first);
		result.shown = Number(s.shown);
		if (errors.length) result.errors = errors;
		if (r === runs - 1) {
			if (spec.opens) {
				// Open the shown closed groups one at a time, breadth first (outer modules before inner).
				result.expand = [];
				const queue = await page.evaluate(() => window.graphView.closedGroups());
				while (queue.length && result.expand.length < spec.opens) {
					const key = queue.shift();
					const ms = await page.evaluate((k) => {
						const t = performance.now();
						const ok = window.graphView.open(k);
						return ok ? performance.now() - t : null;
					}, key);
					if (ms === null) continue;
					result.expand.push({ key, ms: Math.round(ms * 10) / 10, shown: Number(await page.evaluate(() => document.body.dataset.shown)) });
					const now = await page.evaluate(() => window.graphView.closedGroups());
					for (const k of now) if (!queue.includes(k) && !result.expand.some((e) => e.key === k)) queue.push(k);
				}
			}
			if (spec.fps) {
				const t = await page.evaluate(() => {
					const t0 = performance.now();
					document.getElementById('gv-expand').click();
					return performance.now() - t0;
				});
				result.expand_all_ms = Math.round(t);
				result.expanded_shown = Number(await page.evaluate(() => document.body.dataset.shown));
				await page.evaluate(() => window.graphView.fit());
				await page.waitForTimeout(300);
				const a = await page.evaluate(`(${ANIMATE})('graphview')`);
				result.fps = { median_frame_ms: median(a.intervals), p95_frame_ms: pct(a.intervals, 0.95), median_draw_ms: median(a.draws), p95_draw_ms: pct(a.draws, 0.95) };
				// and zoomed in to where labels are drawn
				await page.evaluate(() => window.graphView.setViewport({ ...window.graphView.viewport, k: 0.8 }));
				const b = await page.evaluate(`(${ANIMATE})('graphview')`);
				result.fps_labels = { median_frame_ms: median(b.intervals), p95_frame_ms: pct(b.intervals, 0.95), median_draw_ms: median(b.draws), p95_draw_ms: pct(b.draws, 0.95) };
			}
		}
		await page.close();
	}
	result.open_ms = Math.round(median(opens));
	result.open_runs = opens.map(Math.round);
	return result;
}

async function netronPage(spec) {
	const opens = [];
	const result = { name: spec.name };
	for (let r = 0; r < runs; r++) {
		const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
		// Netron replaces window.eval, which page.evaluate needs: keep the browser's.
		await page.addInitScript(() => {
			const own = window.eval;
			Object.defineProperty(window, 'eval', { get: () => own, set: () => {}, configurable: false });
		});
		const t0 = Date.now();
		await page.goto(spec.url, { timeout: 120000 });
		try {
			// Its first start asks for consent to usage reporting: the time of that click counts, it is small.
			const accept = page.locator('button', { hasText: 'Accept' }).first();
			await accept.waitFor({ state: 'visible', timeout: 30000 }).then(() => accept.click(), () => undefined);
			await page.waitForFunction(() => document.querySelectorAll('#canvas g.node, svg g.node').length > 0, null, { timeout: 300000, polling: 50 });
			opens.push(Date.now() - t0);
			result.nodes_drawn = await page.evaluate(() => document.querySelectorAll('#canvas g.node, svg g.node').length);
			if (r === runs - 1 && spec.fps) {
				await page.waitForTimeout(300);
				const a = await page.evaluate(`(${ANIMATE})('netron')`);
				result.fps = { median_frame_ms: median(a.intervals), p95_frame_ms: pct(a.intervals, 0.95) };
			}
		} catch (e) {
			result.error = String(e).split('\n')[0];
		}
		await page.close();
	}
	result.open_ms = opens.length ? Math.round(median(opens)) : null;
	result.open_runs = opens;
	return result;
}

const out = { pages: [], netron: [] };
for (const spec of config.pages ?? []) out.pages.push(await graphviewPage(spec));
for (const spec of config.netron ?? []) out.netron.push(await netronPage(spec));
await browser.close();
console.log(JSON.stringify(out));
