/**
 * The graph view: a canvas that shows the model's graph (laid out by {@link Layouter}), follows the
 * debugger (the current node, breakpoints, where a NaN started and spread) and colours the nodes
 * by an overlay. The same class runs in the VS Code webview and in the page `graph-dap graph` writes;
 * what it can ask of the debugger goes through its {@link Host}.
 */
import { Controls, buildControls, fillOverlayChoices, installStyle, renderLegend } from './chrome';
import { wireInput } from './input';
import type { GraphDoc, Overlay } from './doc';
import { Prepared, drawOverview, drawScene, prepare } from './draw';
import { Box, Layouter, Scene } from './layout';
import { GraphModel, Kind } from './model';
import { itemColors, markedItems, metricScale, nonFiniteItems } from './overlay';
import { Marks, emptyMarks } from './paint';
import type { DebugView, Host, Summary } from './protocol';
import { Theme, theme } from './style';
import { sceneSvg } from './svg';
import { Viewport, centreOn, distanceToPolyline, fitBox, toWorld } from './viewport';

/** A model of at most this many nodes opens with every module open. */
const OPEN_ALL_UNDER = 300;
/** Below this zoom a whole graph is not readable: the first view shows its top instead. */
const HOME_ZOOM = 0.5;

export function formatNumber(v: number): string {
	if (!Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf';
	const a = Math.abs(v);
	if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
	return String(Number(v.toPrecision(4)));
}

export class GraphView {
	readonly c: Controls;
	model?: GraphModel;
	private layouter?: Layouter;
	scene?: Scene;
	prepared?: Prepared;
	private expanded = new Set<number>();
	vp: Viewport = { k: 1, x: 0, y: 0 };
	marks: Marks = emptyMarks();
	overlays: Overlay[] = [];
	overlayChoice = '';
	debug: DebugView = { session: '', phase: 'none', current: null, stop: 0, reason: '', text: '', origin: [], spread: [] };
	private breakpointIds: string[] = [];
	private theme: Theme;
	private frame = 0;
	overview?: { k: number; x: number; y: number; image: HTMLCanvasElement };
	private pendingDrawn?: { stop: number; t0: number; at?: number };
	summaryRequest = 0;
	hoverTimer = 0;
	/** Timings of the last layout and frame, for the benchmarks. */
	readonly stats = { layoutMs: 0, drawMs: 0, boxes: 0, laidOut: 0, firstDrawAt: 0 };

	constructor(readonly host: Host) {
		installStyle();
		this.c = buildControls(host.live);
		this.theme = theme(this.isDark());
		wireInput(this);
		new ResizeObserver(() => this.resize()).observe(this.c.canvas);
	}

	private isDark(): boolean {
		const b = document.body.classList;
		if (b.contains('vscode-dark') || b.contains('vscode-high-contrast')) return true;
		if (b.contains('vscode-light') || b.contains('vscode-high-contrast-light')) return false;
		return window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;
	}

	// -- what the host gives ----------------------------------------------------------------

	setGraph(doc: GraphDoc, overlays: Overlay[]): void {
		const t0 = performance.now();
		this.model = new GraphModel(doc);
		this.layouter = new Layouter(this.model);
		this.expanded = new Set(doc.nodes.length <= OPEN_ALL_UNDER ? this.model.items.filter((it) => it.expandable).map((it) => it.index) : []);
		this.overlays = overlays;
		this.overlayChoice = overlays.length ? `0:${(overlays[0] as { default?: string }).default || overlays[0].metrics[0]?.key}` : '';
		fillOverlayChoices(this.c.overlay, overlays, this.overlayChoice);
		document.title = `${doc.model}: graph`;
		this.relayout();
		this.home();
		this.updateMarks();
		document.body.dataset.nodes = String(doc.nodes.length);
		this.invalidate(true);
		this.stats.layoutMs = performance.now() - t0;
	}

	addOverlay(overlay: Overlay): void {
		this.overlays.push(overlay);
		this.overlayChoice = `${this.overlays.length - 1}:${(overlay as { default?: string }).default || overlay.metrics[0]?.key}`;
		fillOverlayChoices(this.c.overlay, this.overlays, this.overlayChoice);
		this.updateMarks();
	}

	setDebug(debug: DebugView): void {
		const t0 = performance.now();
		const moved = debug.current !== this.debug.current || debug.stop !== this.debug.stop;
		this.debug = debug;
		this.updateMarks();
		if (moved && debug.current && this.scene && this.model) {
			// Bring the current node (or the closed module that holds it) into view.
			const b = this.scene.box.get(this.marks.current);
			if (b) this.bringIntoView(b);
		}
		if (debug.phase === 'stopped') this.pendingDrawn = { stop: debug.stop, t0, at: debug.stoppedAt };
		this.invalidate(true); // now, not at the next frame: the stop is what the user waits for
	}

	setBreakpoints(ids: string[]): void {
		this.breakpointIds = ids;
		this.updateMarks();
	}

	/** Selects a node (the listing's cursor moved to its line): shown, opened to it if needed. */
	select(id: string, open = true): void {
		if (!this.model) return;
		const item = this.model.itemOfNode(id);
		if (item < 0) return;
		if (open) this.reveal(item);
		this.marks.selected = this.scene!.shownAs[item];
		document.body.dataset.selected = id;
		this.bringIntoView(this.scene!.box.get(this.marks.selected)!);
		this.invalidate(true);
	}

	/** Centres a box unless it is well inside the canvas, clear of the legend and the minimap at the bottom. */
	bringIntoView(b: Box): void {
		const w = this.c.canvas.clientWidth;
		const h = this.c.canvas.clientHeight;
		const [x0, y0] = [b.x * this.vp.k + this.vp.x, b.y * this.vp.k + this.vp.y];
		const clear = x0 >= 24 && y0 >= 24 && x0 + b.w * this.vp.k <= w - 24 && y0 + b.h * this.vp.k <= h - 170;
		if (clear) return;
		if (this.vp.k < HOME_ZOOM) this.vp = { ...this.vp, k: 0.85 };
		this.vp = centreOn(this.vp, b.x + b.w / 2, b.y + b.h / 2, w, h * 0.8);
	}

	summaries(request: number, list: Summary[]): void {
		if (request !== this.summaryRequest || this.c.tooltip.hidden) return;
		const extra = list.map((s) => `${s.name}: ${s.available ? s.text : 'not computed yet'}`).join('\n');
		const base = this.c.tooltip.dataset.base ?? '';
		this.c.tooltip.textContent = `${base}\n\n${extra}`;
	}

	status(text: string, error = false): void {
		this.c.status.textContent = text;
		this.c.status.className = error ? 'error' : '';
		this.c.status.title = text;
	}

	// -- state -> picture ---------------------------------------------------------------------

	private relayout(anchor?: number): void {
		if (!this.model || !this.layouter) return;
		const before = anchor !== undefined ? this.scene?.box.get(anchor) : undefined;
		const t0 = performance.now();
		this.scene = this.layouter.scene(this.expanded);
		this.prepared = prepare(this.scene);
		this.stats.layoutMs = performance.now() - t0;
		this.stats.laidOut = this.layouter.laidOut;
		const after = anchor !== undefined ? this.scene.box.get(anchor) : undefined;
		if (before && after) {
			this.vp = { k: this.vp.k, x: this.vp.x + (before.x - after.x) * this.vp.k, y: this.vp.y + (before.y - after.y) * this.vp.k };
		}
		this.overview = undefined;
		this.updateMarks();
		document.body.dataset.shown = String(this.scene.boxes.length);
	}

	updateMarks(): void {
		if (!this.model || !this.scene) return;
		const m = this.model;
		const shown = this.scene.shownAs;
		const marks = emptyMarks();
		marks.selected = this.marks.selected;
		marks.hover = this.marks.hover;
		marks.found = this.marks.found;
		const [oi, key] = this.overlayChoice.split(':');
		const overlay = this.overlayChoice ? this.overlays[Number(oi)] : undefined;
		let legendOverlay;
		if (overlay) {
			const scale = metricScale(overlay, key);
			marks.colors = itemColors(m, overlay, scale);
			marks.marked = markedItems(m, overlay);
			legendOverlay = { overlay, scale, format: formatNumber };
		}
		marks.nonFinite = nonFiniteItems(m, this.debug.origin, this.debug.spread);
		const current = this.debug.current && this.debug.phase !== 'running' ? m.itemOfNode(this.debug.current) : -1;
		marks.current = current >= 0 ? shown[current] : -1;
		for (const id of this.breakpointIds) {
			const item = m.itemOfNode(id);
			if (item < 0) continue;
			const at = shown[item];
			marks.breakpoints.set(at, (marks.breakpoints.get(at) ?? 0) + 1);
		}
		this.marks = marks;
		const legend = renderLegend(this.c.legend, {
			overlay: legendOverlay,
			origin: this.debug.origin.length,
			spread: this.debug.spread.length,
			current: current >= 0 ? this.debug.current : null,
			breakpoints: this.breakpointIds.length,
			theme: this.theme,
		});
		const ds = document.body.dataset;
		ds.legend = legend;
		ds.overlay = overlay ? `${overlay.kind}:${key}` : '';
		ds.current = current >= 0 ? this.debug.current! : '';
		ds.currentShown = marks.current >= 0 ? m.items[marks.current].key : '';
		ds.breakpoints = this.breakpointIds.join(',');
		ds.origin = this.debug.origin.join(',');
		ds.spread = String(this.debug.spread.length);
		this.overview = undefined;
		this.invalidate();
	}

	invalidate(now = false): void {
		if (now) {
			cancelAnimationFrame(this.frame);
			this.frame = 0;
			this.draw();
			return;
		}
		if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
	}

	private draw(): void {
		this.frame = 0;
		if (!this.model || !this.scene || !this.prepared) return;
		const t0 = performance.now();
		const canvas = this.c.canvas;
		const dpr = window.devicePixelRatio || 1;
		const w = canvas.clientWidth;
		const h = canvas.clientHeight;
		if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
			canvas.width = Math.round(w * dpr);
			canvas.height = Math.round(h * dpr);
		}
		const ctx = canvas.getContext('2d')!;
		this.stats.boxes = drawScene(ctx, this.model, this.scene, this.prepared, this.marks, this.theme, this.vp, w, h, dpr);
		this.drawMinimap();
		this.stats.drawMs = performance.now() - t0;
		if (!this.stats.firstDrawAt) this.stats.firstDrawAt = performance.now();
		document.body.dataset.drawn = '1';
		if (this.pendingDrawn) {
			const { stop, t0: start, at } = this.pendingDrawn;
			this.pendingDrawn = undefined;
			const view = performance.now() - start;
			this.host.post({ type: 'drawn', stop, ms: at ? Date.now() - at : view, view });
		}
	}

	private drawMinimap(): void {
		const mm = this.c.minimap;
		const w = mm.clientWidth;
		const h = mm.clientHeight;
		if (!this.overview) {
			const image = document.createElement('canvas');
			image.width = w;
			image.height = h;
			const o = drawOverview(image.getContext('2d')!, this.model!, this.scene!, this.prepared!, this.marks, this.theme, w, h);
			this.overview = { ...o, image };
		}
		if (mm.width !== w || mm.height !== h) {
			mm.width = w;
			mm.height = h;
		}
		const ctx = mm.getContext('2d')!;
		ctx.setTransform(1, 0, 0, 1, 0, 0);
		ctx.clearRect(0, 0, w, h);
		ctx.drawImage(this.overview.image, 0, 0);
		const { k, x, y } = this.overview;
		const [wx0, wy0] = toWorld(this.vp, 0, 0);
		const [wx1, wy1] = toWorld(this.vp, this.c.canvas.clientWidth, this.c.canvas.clientHeight);
		ctx.strokeStyle = 'rgba(0,122,204,0.9)';
		ctx.lineWidth = 1.5;
		ctx.strokeRect(x + wx0 * k, y + wy0 * k, (wx1 - wx0) * k, (wy1 - wy0) * k);
	}

	private resize(): void {
		this.overview = undefined;
		this.invalidate();
	}

	// -- what the user does -------------------------------------------------------------------

	/** Selects a node picked in the search results, and tells the host (the listing follows). */
	pick(id: string): void {
		this.c.results.hidden = true;
		this.marks.found = new Set();
		this.select(id);
		this.host.post({ type: 'select', node: id });
	}

	fit(): void {
		if (!this.scene) return;
		const r = this.c.canvas.getBoundingClientRect();
		this.vp = fitBox(0, 0, this.scene.width, this.scene.height, r.width || 800, r.height || 600);
		this.invalidate();
	}

	/** The first view: the whole graph when it is readable so, else its top at a readable zoom. */
	home(): void {
		if (!this.scene) return;
		const r = this.c.canvas.getBoundingClientRect();
		const w = r.width || 800;
		const h = r.height || 600;
		const fit = fitBox(0, 0, this.scene.width, this.scene.height, w, h);
		if (fit.k >= HOME_ZOOM) {
			this.vp = fit;
		} else {
			const k = 0.85;
			this.vp = { k, x: this.scene.width * k < w ? (w - this.scene.width * k) / 2 : 24, y: 16 };
		}
		this.invalidate();
	}

	/** Opens (or closes) a group; the clicked box stays where it was on the screen. */
	toggle(item: number, open?: boolean): void {
		const it = this.model!.items[item];
		if (!it.expandable) return;
		const now = open ?? !this.expanded.has(item);
		if (now) this.expanded.add(item);
		else {
			this.expanded.delete(item);
			for (const k of [...this.expanded]) if (this.model!.ancestors(k).includes(item)) this.expanded.delete(k);
		}
		this.relayout(item);
	}

	setAll(open: boolean): void {
		if (!this.model) return;
		this.expanded = new Set(open ? this.model.items.filter((it) => it.expandable).map((it) => it.index) : []);
		this.relayout();
		this.fit();
	}

	/** Opens the groups down to `item`, so that it is shown as itself. */
	reveal(item: number): void {
		const path = this.model!.ancestors(item).slice(0, -1);
		const closed = path.filter((k) => this.model!.items[k].expandable && !this.expanded.has(k));
		if (!closed.length) return;
		closed.forEach((k) => this.expanded.add(k));
		this.relayout();
	}

	/** The screen box of a node (or of what shows it), relative to the canvas; for tests and the benchmarks. */
	boxOf(id: string): { x: number; y: number; w: number; h: number; shownAs: string } | undefined {
		if (!this.model || !this.scene) return undefined;
		const item = this.model.itemOfNode(id) >= 0 ? this.model.itemOfNode(id) : this.model.items.findIndex((it) => it.key === id);
		if (item < 0) return undefined;
		const b = this.scene.box.get(this.scene.shownAs[item])!;
		return { x: b.x * this.vp.k + this.vp.x, y: b.y * this.vp.k + this.vp.y, w: b.w * this.vp.k, h: b.h * this.vp.k, shownAs: this.model.items[b.item].key };
	}

	/** The screen point halfway along the edge between two shown items (by key), relative to the canvas; for tests. */
	edgeMid(from: string, to: string): { x: number; y: number } | undefined {
		const key = (i: number) => this.model!.items[i].key;
		const e = this.scene?.edges.find((x) => key(x.from) === from && key(x.to) === to);
		if (!e) return undefined;
		const k = Math.floor(e.points.length / 4) * 2;
		const [x, y] = [(e.points[k - 2 >= 0 ? k - 2 : 0] + e.points[k]) / 2, (e.points[k - 1 >= 0 ? k - 1 : 1] + e.points[k + 1]) / 2];
		return { x: x * this.vp.k + this.vp.x, y: y * this.vp.k + this.vp.y };
	}

	/** Keys of the items shown now; for tests. */
	shownKeys(): string[] {
		return this.scene ? this.scene.boxes.map((b) => this.model!.items[b.item].key) : [];
	}

	/** Keys of the shown groups that are closed, in drawing order; for the benchmarks. */
	closedGroups(): string[] {
		return this.scene ? this.scene.boxes.filter((b) => !b.open && this.model!.items[b.item].expandable).map((b) => this.model!.items[b.item].key) : [];
	}

	/** Opens the group with this key (`module:0:encoder`); for tests and the benchmarks. */
	open(key: string): boolean {
		const i = this.model?.items.findIndex((it) => it.key === key) ?? -1;
		if (i < 0) return false;
		this.toggle(i, true);
		this.invalidate(true);
		return true;
	}

	setViewport(vp: Viewport): void {
		this.vp = vp;
		this.invalidate(true);
	}

	get viewport(): Viewport {
		return { ...this.vp };
	}

	/** The scene's size; for the benchmarks. */
	get size(): { width: number; height: number } {
		return { width: this.scene?.width ?? 0, height: this.scene?.height ?? 0 };
	}

	hit(sx: number, sy: number): { box?: Box; edge?: number } {
		if (!this.scene || !this.prepared) return {};
		const [wx, wy] = toWorld(this.vp, sx, sy);
		const order = this.prepared.order;
		for (let i = order.length - 1; i >= 0; i--) {
			const b = order[i];
			if (wx >= b.x && wx <= b.x + b.w && wy >= b.y && wy <= b.y + b.h && !b.open) return { box: b };
		}
		const tolerance = 5 / this.vp.k;
		let best = -1;
		let bestD = tolerance;
		this.scene.edges.forEach((e, k) => {
			const eb = this.prepared!.edgeBounds;
			if (wx < eb[4 * k] - tolerance || wx > eb[4 * k + 2] + tolerance || wy < eb[4 * k + 1] - tolerance || wy > eb[4 * k + 3] + tolerance) return;
			const d = distanceToPolyline(e.points, wx, wy);
			if (d < bestD) {
				bestD = d;
				best = k;
			}
		});
		if (best >= 0) return { edge: best };
		for (let i = order.length - 1; i >= 0; i--) {
			const b = order[i];
			if (b.open && wx >= b.x && wx <= b.x + b.w && wy >= b.y && wy <= b.y + b.h) return { box: b };
		}
		return {};
	}

	nodeId(item: number): string | undefined {
		const it = this.model!.items[item];
		return it.kind === Kind.Node ? it.key : undefined;
	}

	exportSvg(): string {
		return sceneSvg(this.model!, this.scene!, this.marks, this.theme, this.model!.doc.model);
	}

	exportPng(): string {
		const s = this.scene!;
		const scale = Math.min(2, 8000 / Math.max(s.width, s.height, 1));
		const canvas = document.createElement('canvas');
		canvas.width = Math.max(1, Math.ceil(s.width * scale) + 32);
		canvas.height = Math.max(1, Math.ceil(s.height * scale) + 32);
		const vp = { k: scale, x: 16, y: 16 };
		drawScene(canvas.getContext('2d')!, this.model!, s, this.prepared!, { ...this.marks, hover: -1 }, this.theme, vp, canvas.width, canvas.height, 1);
		return canvas.toDataURL('image/png');
	}
}
