/**
 * The graph view: a canvas that shows the model's graph (laid out by {@link Layouter}), follows the
 * debugger (the current node, breakpoints, where a NaN started and spread) and colours the nodes
 * by an overlay. The same class runs in the VS Code webview and in the page `graph-dap graph` writes;
 * what it can ask of the debugger goes through its {@link Host}.
 */
import { Controls, buildControls, fillOverlayChoices, installStyle, renderLegend, showMenu, MenuItem } from './chrome';
import type { GraphDoc, Overlay } from './doc';
import { Prepared, drawOverview, drawScene, prepare } from './draw';
import { Box, Layouter, Scene } from './layout';
import { GraphModel, Kind } from './model';
import { itemColors, markedItems, metricScale, nonFiniteItems } from './overlay';
import { Marks, emptyMarks } from './paint';
import type { DebugView, Host, Summary } from './protocol';
import { Theme, theme } from './style';
import { sceneSvg } from './svg';
import { Viewport, centreOn, distanceToPolyline, fitBox, toWorld, visible, zoomAt } from './viewport';

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
	private readonly c: Controls;
	private model?: GraphModel;
	private layouter?: Layouter;
	private scene?: Scene;
	private prepared?: Prepared;
	private expanded = new Set<number>();
	private vp: Viewport = { k: 1, x: 0, y: 0 };
	private marks: Marks = emptyMarks();
	private overlays: Overlay[] = [];
	private overlayChoice = '';
	private debug: DebugView = { session: '', phase: 'none', current: null, stop: 0, reason: '', text: '', origin: [], spread: [] };
	private breakpointIds: string[] = [];
	private theme: Theme;
	private frame = 0;
	private overview?: { k: number; x: number; y: number; image: HTMLCanvasElement };
	private pendingDrawn?: { stop: number; t0: number; at?: number };
	private summaryRequest = 0;
	private hoverTimer = 0;
	/** Timings of the last layout and frame, for the benchmarks. */
	readonly stats = { layoutMs: 0, drawMs: 0, boxes: 0, laidOut: 0 };

	constructor(private readonly host: Host) {
		installStyle();
		this.c = buildControls(host.live);
		this.theme = theme(this.isDark());
		this.wire();
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
			const r = this.c.canvas.getBoundingClientRect();
			if (b && !visible(this.vp, b.x, b.y, b.w, b.h, r.width, r.height)) this.vp = centreOn(this.vp, b.x + b.w / 2, b.y + b.h / 2, r.width, r.height);
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
		const b = this.scene!.box.get(this.marks.selected)!;
		const r = this.c.canvas.getBoundingClientRect();
		if (!visible(this.vp, b.x, b.y, b.w, b.h, r.width, r.height)) this.vp = centreOn(this.vp, b.x + b.w / 2, b.y + b.h / 2, r.width, r.height);
		this.invalidate(true);
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

	private updateMarks(): void {
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

	private invalidate(now = false): void {
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

	/** Keys of the items shown now; for tests. */
	shownKeys(): string[] {
		return this.scene ? this.scene.boxes.map((b) => this.model!.items[b.item].key) : [];
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

	private hit(sx: number, sy: number): { box?: Box; edge?: number } {
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

	private nodeId(item: number): string | undefined {
		const it = this.model!.items[item];
		return it.kind === Kind.Node ? it.key : undefined;
	}

	private click(e: MouseEvent): void {
		const { box, edge } = this.hit(e.offsetX, e.offsetY);
		if (edge !== undefined) {
			const value = this.model!.doc.values[this.scene!.edges[edge].values[0]][0];
			if (this.host.live) this.host.post({ type: 'viewTensor', value });
			return;
		}
		if (!box) return;
		const it = this.model!.items[box.item];
		if (box.open) {
			if (e.offsetY <= (box.y + 24) * this.vp.k + this.vp.y && it.expandable) this.toggle(box.item, false);
			return;
		}
		const id = this.nodeId(box.item);
		if (id && this.host.live && e.offsetX - (box.x * this.vp.k + this.vp.x) < Math.max(12, 14 * this.vp.k)) {
			this.host.post({ type: 'toggleBreakpoint', node: id });
			return;
		}
		if (it.kind === Kind.Module) {
			this.toggle(box.item, true);
			return;
		}
		this.marks.selected = box.item;
		if (id) {
			document.body.dataset.selected = id;
			this.host.post({ type: 'select', node: id });
		}
		this.invalidate();
	}

	private contextMenu(e: MouseEvent): void {
		e.preventDefault();
		const { box, edge } = this.hit(e.offsetX, e.offsetY);
		const items: (MenuItem | null)[] = [];
		const live = this.host.live;
		if (edge !== undefined) {
			for (const v of this.scene!.edges[edge].values) {
				const value = this.model!.doc.values[v][0];
				if (live) items.push({ label: `View Tensor: ${value}`, run: () => this.host.post({ type: 'viewTensor', value }) });
				items.push({ label: `Copy name: ${value}`, run: () => void navigator.clipboard?.writeText(value) });
			}
		} else if (box) {
			const it = this.model!.items[box.item];
			const id = this.nodeId(box.item);
			if (id && live) {
				items.push({ label: 'Run to Here', run: () => this.host.post({ type: 'runTo', node: id }) });
				items.push({ label: 'Jump to Here', run: () => this.host.post({ type: 'jumpTo', node: id }) });
				items.push({ label: 'Toggle Breakpoint', run: () => this.host.post({ type: 'toggleBreakpoint', node: id }) });
				items.push(null);
				for (const v of this.model!.doc.nodes[it.row][6]) {
					const value = this.model!.doc.values[v][0];
					items.push({ label: `View Tensor: ${value}`, run: () => this.host.post({ type: 'viewTensor', value }) });
				}
				items.push({ label: 'Reveal in Listing', run: () => this.host.post({ type: 'select', node: id }) });
			}
			if (it.expandable) items.push({ label: box.open ? 'Close' : 'Open', run: () => this.toggle(box.item, !box.open) });
			if (id) items.push({ label: `Copy id: ${id}`, run: () => void navigator.clipboard?.writeText(id) });
		}
		if (items.length) showMenu(this.c.menu, e.clientX, e.clientY, items);
	}

	private hover(e: MouseEvent): void {
		const { box, edge } = this.hit(e.offsetX, e.offsetY);
		const tip = this.c.tooltip;
		const m = this.model!;
		const item = box?.item ?? -1;
		if (item !== this.marks.hover) {
			this.marks.hover = item;
			this.invalidate();
		}
		let text = '';
		let names: string[] = [];
		if (edge !== undefined) {
			const values = this.scene!.edges[edge].values.map((v) => m.doc.values[v]);
			text = values.map(([name, type]) => `${name}: ${type}`).join('\n') + (this.host.live ? '\n(click: view the tensor)' : '');
			names = values.map(([name]) => name);
		} else if (box) {
			const it = m.items[box.item];
			if (it.kind === Kind.Node) {
				const row = m.doc.nodes[it.row];
				text = `${it.key} (${it.label})\n${row[8]}`;
				names = row[6].map((v) => m.doc.values[v][0]);
			} else if (it.kind === Kind.Module) {
				text = `${it.chunk ? 'nodes in run order' : 'module'} ${it.label}${it.detail ? `: ${it.detail}` : ''}\n${it.nodes} nodes — click to ${box.open ? 'close (on its title)' : 'open'}`;
			} else if (it.kind === Kind.Input || it.kind === Kind.Output) {
				text = `${it.kind === Kind.Input ? 'input' : 'output'} ${it.label}: ${it.detail}`;
				names = [it.label];
			} else text = it.label;
			const [oi] = this.overlayChoice.split(':');
			const o = this.overlayChoice ? this.overlays[Number(oi)] : undefined;
			const v = it.kind === Kind.Node && o ? o.values[it.key] : undefined;
			if (v) text += `\n${o!.kind}: ${Object.entries(v).map(([k, x]) => `${k}=${typeof x === 'number' ? formatNumber(x) : x}`).join(' ')}`;
			if (it.kind === Kind.Node && o?.marks[it.key]) text += `\n${o.marks[it.key]}`;
			if (it.kind === Kind.Node && this.debug.origin.includes(it.key)) text += '\nNaN/Inf starts here';
			else if (it.kind === Kind.Node && this.debug.spread.includes(it.key)) text += '\nNaN/Inf spread here';
		}
		if (!text) {
			tip.hidden = true;
			return;
		}
		tip.hidden = false;
		tip.textContent = text;
		tip.dataset.base = text;
		const r = tip.getBoundingClientRect();
		tip.style.left = `${Math.min(e.clientX + 14, window.innerWidth - r.width - 6)}px`;
		tip.style.top = `${Math.min(e.clientY + 14, window.innerHeight - r.height - 6)}px`;
		window.clearTimeout(this.hoverTimer);
		if (this.host.live && this.debug.phase === 'stopped' && names.length) {
			const request = ++this.summaryRequest;
			this.hoverTimer = window.setTimeout(() => this.host.post({ type: 'summaries', request, names }), 120);
		}
	}

	private runSearch(): void {
		const box = this.c.results;
		const q = this.c.search.value;
		const hits = this.model ? this.model.search(q) : [];
		this.marks.found = new Set(hits.map((h) => this.scene!.shownAs[this.model!.nodeItem[h.row]]));
		box.replaceChildren(
			...hits.map((h, k) => {
				const row = document.createElement('div');
				row.setAttribute('role', 'option');
				const [id, op] = this.model!.doc.nodes[h.row];
				row.textContent = `${id} (${op})`;
				const why = document.createElement('span');
				why.className = 'why';
				why.textContent = h.why;
				row.append(why);
				if (k === 0) row.classList.add('active');
				row.addEventListener('mousedown', (e) => {
					e.preventDefault();
					this.pick(id);
				});
				return row;
			}),
		);
		box.hidden = !q || hits.length === 0;
		document.body.dataset.found = String(hits.length);
		this.invalidate();
	}

	private pick(id: string): void {
		this.c.results.hidden = true;
		this.marks.found = new Set();
		this.select(id);
		this.host.post({ type: 'select', node: id });
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

	private wire(): void {
		const { canvas, minimap, search, buttons, overlay, menu } = this.c;
		let drag: { x: number; y: number; vp: Viewport; moved: boolean } | undefined;
		canvas.addEventListener('mousedown', (e) => {
			if (e.button !== 0) return;
			menu.hidden = true;
			drag = { x: e.clientX, y: e.clientY, vp: this.vp, moved: false };
		});
		window.addEventListener('mousemove', (e) => {
			if (drag && (e.buttons & 1)) {
				const dx = e.clientX - drag.x;
				const dy = e.clientY - drag.y;
				if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
				if (drag.moved) {
					canvas.classList.add('dragging');
					this.c.tooltip.hidden = true;
					this.vp = { k: drag.vp.k, x: drag.vp.x + dx, y: drag.vp.y + dy };
					this.invalidate();
				}
			}
		});
		window.addEventListener('mouseup', (e) => {
			const d = drag;
			drag = undefined;
			canvas.classList.remove('dragging');
			if (d && !d.moved && e.target === canvas) this.click(e);
		});
		canvas.addEventListener('mousemove', (e) => {
			if (!drag?.moved && this.model) this.hover(e);
		});
		canvas.addEventListener('mouseleave', () => (this.c.tooltip.hidden = true));
		canvas.addEventListener('dblclick', (e) => {
			const { box } = this.hit(e.offsetX, e.offsetY);
			if (box && !box.open && this.model!.items[box.item].expandable) this.toggle(box.item, true);
		});
		canvas.addEventListener('contextmenu', (e) => this.contextMenu(e));
		canvas.addEventListener(
			'wheel',
			(e) => {
				e.preventDefault();
				const factor = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
				this.vp = zoomAt(this.vp, e.offsetX, e.offsetY, factor);
				this.invalidate();
			},
			{ passive: false },
		);
		canvas.addEventListener('keydown', (e) => {
			const step = 60;
			if (e.key === 'ArrowLeft') this.vp = { ...this.vp, x: this.vp.x + step };
			else if (e.key === 'ArrowRight') this.vp = { ...this.vp, x: this.vp.x - step };
			else if (e.key === 'ArrowUp') this.vp = { ...this.vp, y: this.vp.y + step };
			else if (e.key === 'ArrowDown') this.vp = { ...this.vp, y: this.vp.y - step };
			else if (e.key === '+' || e.key === '=') this.vp = zoomAt(this.vp, canvas.clientWidth / 2, canvas.clientHeight / 2, 1.25);
			else if (e.key === '-') this.vp = zoomAt(this.vp, canvas.clientWidth / 2, canvas.clientHeight / 2, 0.8);
			else if (e.key === 'F9' && this.marks.selected >= 0) {
				const id = this.nodeId(this.marks.selected);
				if (id && this.host.live) this.host.post({ type: 'toggleBreakpoint', node: id });
			} else return;
			e.preventDefault();
			this.invalidate();
		});
		const pan = (e: MouseEvent) => {
			if (!this.overview) return;
			const { k, x, y } = this.overview;
			const r = minimap.getBoundingClientRect();
			this.vp = centreOn(this.vp, (e.clientX - r.left - x) / k, (e.clientY - r.top - y) / k, canvas.clientWidth, canvas.clientHeight);
			this.invalidate();
		};
		minimap.addEventListener('mousedown', (e) => {
			pan(e);
			const move = (m: MouseEvent) => pan(m);
			window.addEventListener('mousemove', move);
			window.addEventListener('mouseup', () => window.removeEventListener('mousemove', move), { once: true });
		});
		search.addEventListener('input', () => this.runSearch());
		search.addEventListener('keydown', (e) => {
			if (e.key === 'Enter') {
				const first = this.model?.search(search.value, 1)[0];
				if (first) this.pick(this.model!.doc.nodes[first.row][0]);
			} else if (e.key === 'Escape') {
				search.value = '';
				this.runSearch();
			}
		});
		search.addEventListener('blur', () => setTimeout(() => (this.c.results.hidden = true), 150));
		window.addEventListener('keydown', (e) => {
			if ((e.key === 'f' && (e.ctrlKey || e.metaKey)) || (e.key === '/' && document.activeElement !== search)) {
				e.preventDefault();
				search.focus();
				search.select();
			} else if (e.key === 'Escape') menu.hidden = true;
		});
		window.addEventListener('mousedown', (e) => {
			if (!menu.contains(e.target as Node)) menu.hidden = true;
		});
		buttons.fit.addEventListener('click', () => this.fit());
		buttons.collapse.addEventListener('click', () => this.setAll(false));
		buttons.expand.addEventListener('click', () => this.setAll(true));
		buttons.openOverlay.addEventListener('click', () => this.host.post({ type: 'openOverlay' }));
		buttons.svg.addEventListener('click', () => this.host.post({ type: 'export', format: 'svg', data: this.exportSvg() }));
		buttons.png.addEventListener('click', () => this.host.post({ type: 'export', format: 'png', data: this.exportPng() }));
		overlay.addEventListener('change', () => {
			this.overlayChoice = overlay.value;
			this.updateMarks();
		});
	}
}
