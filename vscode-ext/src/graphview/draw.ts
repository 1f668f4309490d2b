/**
 * Drawing a scene on a canvas: only what is in the viewport, labels only where they can be read,
 * edges stroked in one path. Pan and zoom redraw from the layout, nothing is laid out again.
 */
import { Box, Scene } from './layout';
import { GraphModel } from './model';
import { Marks, Paint, drawOrder, paint } from './paint';
import { Theme, css } from './style';
import { Viewport } from './viewport';
import { clip } from './svg';

/** Below this zoom, labels are not drawn (12 px text would be under 5 px). */
const LABEL_ZOOM = 0.42;

/** Per scene, kept between frames: boxes in drawing order and the edges' bounding boxes. */
export interface Prepared {
	order: Box[];
	edgeBounds: Float64Array;
}

export function prepare(scene: Scene): Prepared {
	const edgeBounds = new Float64Array(scene.edges.length * 4);
	scene.edges.forEach((e, k) => {
		let x0 = Infinity;
		let y0 = Infinity;
		let x1 = -Infinity;
		let y1 = -Infinity;
		for (let i = 0; i < e.points.length; i += 2) {
			x0 = Math.min(x0, e.points[i]);
			x1 = Math.max(x1, e.points[i]);
			y0 = Math.min(y0, e.points[i + 1]);
			y1 = Math.max(y1, e.points[i + 1]);
		}
		edgeBounds.set([x0, y0, x1, y1], k * 4);
	});
	return { order: drawOrder(scene.boxes).filter((b) => b.item !== 0), edgeBounds };
}

function polyline(ctx: CanvasRenderingContext2D, p: number[]): void {
	ctx.moveTo(p[0], p[1]);
	const n = p.length / 2;
	if (n === 2) {
		ctx.lineTo(p[2], p[3]);
		return;
	}
	for (let i = 1; i < n - 1; i++) {
		ctx.quadraticCurveTo(p[2 * i], p[2 * i + 1], (p[2 * i] + p[2 * i + 2]) / 2, (p[2 * i + 1] + p[2 * i + 3]) / 2);
	}
	ctx.lineTo(p[p.length - 2], p[p.length - 1]);
}

function arrow(ctx: CanvasRenderingContext2D, p: number[]): void {
	const n = p.length;
	const x = p[n - 2];
	const y = p[n - 1];
	const a = Math.atan2(y - p[n - 3], x - p[n - 4]);
	ctx.moveTo(x, y);
	ctx.lineTo(x - 7 * Math.cos(a - 0.4), y - 7 * Math.sin(a - 0.4));
	ctx.lineTo(x - 7 * Math.cos(a + 0.4), y - 7 * Math.sin(a + 0.4));
	ctx.closePath();
}

/** Draws the part of `scene` under the viewport; returns how many boxes were drawn. */
export function drawScene(
	ctx: CanvasRenderingContext2D,
	model: GraphModel,
	scene: Scene,
	prepared: Prepared,
	marks: Marks,
	theme: Theme,
	vp: Viewport,
	w: number,
	h: number,
	dpr: number,
): number {
	ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
	ctx.fillStyle = css(theme.background);
	ctx.fillRect(0, 0, w, h);
	ctx.setTransform(dpr * vp.k, 0, 0, dpr * vp.k, dpr * vp.x, dpr * vp.y);
	const x0 = -vp.x / vp.k;
	const y0 = -vp.y / vp.k;
	const x1 = (w - vp.x) / vp.k;
	const y1 = (h - vp.y) / vp.k;
	const inView = (b: Box) => b.x + b.w >= x0 && b.y + b.h >= y0 && b.x <= x1 && b.y <= y1;
	const labels = vp.k >= LABEL_ZOOM;
	const px = 1 / vp.k; // one screen pixel in world units
	let drawn = 0;
	const shown = prepared.order.filter(inView);
	const paints = new Map<Box, Paint>();
	for (const b of shown) paints.set(b, paint(model, b, marks, theme));
	// Open groups, outer first.
	for (const b of shown) {
		if (!b.open) continue;
		const p = paints.get(b)!;
		box(ctx, b, p, px, false);
		if (labels) {
			ctx.fillStyle = css(p.text);
			ctx.font = 'bold 12px sans-serif';
			ctx.textAlign = 'left';
			ctx.textBaseline = 'middle';
			ctx.fillText(clip(p.title, b.w / 7), b.x + 8, b.y + 12);
		}
		if (p.breakpoints) dot(ctx, b, theme);
		drawn++;
	}
	// Edges: one path for all, and one for those of the selected or hovered item.
	const hot = new Set([marks.selected, marks.hover]);
	ctx.lineWidth = Math.max(1.2, px);
	ctx.strokeStyle = css(theme.edge);
	ctx.fillStyle = css(theme.edge);
	const { edgeBounds: eb } = prepared;
	const hotEdges: number[] = [];
	ctx.beginPath();
	scene.edges.forEach((e, k) => {
		if (eb[4 * k + 2] < x0 || eb[4 * k + 3] < y0 || eb[4 * k] > x1 || eb[4 * k + 1] > y1) return;
		if (hot.has(e.from) || hot.has(e.to)) hotEdges.push(k);
		else polyline(ctx, e.points);
	});
	ctx.stroke();
	if (vp.k > 0.25) {
		ctx.beginPath();
		scene.edges.forEach((e, k) => {
			if (eb[4 * k + 2] < x0 || eb[4 * k + 3] < y0 || eb[4 * k] > x1 || eb[4 * k + 1] > y1) return;
			arrow(ctx, e.points);
		});
		ctx.fill();
	}
	if (hotEdges.length) {
		ctx.strokeStyle = css(theme.selection);
		ctx.fillStyle = css(theme.selection);
		ctx.lineWidth = Math.max(2, 2 * px);
		ctx.beginPath();
		for (const k of hotEdges) polyline(ctx, scene.edges[k].points);
		ctx.stroke();
		ctx.beginPath();
		for (const k of hotEdges) arrow(ctx, scene.edges[k].points);
		ctx.fill();
	}
	// Closed items.
	ctx.textAlign = 'center';
	ctx.textBaseline = 'middle';
	for (const b of shown) {
		if (b.open) continue;
		const p = paints.get(b)!;
		box(ctx, b, p, px, labels);
		if (labels) {
			ctx.fillStyle = css(p.text);
			ctx.font = 'bold 12px sans-serif';
			ctx.fillText(clip(p.title, b.w / 7), b.x + b.w / 2, b.y + (p.sub ? b.h / 2 - 6 : b.h / 2));
			if (p.sub) {
				ctx.font = '9.5px sans-serif';
				ctx.fillText(clip(p.sub, b.w / 5.4), b.x + b.w / 2, b.y + b.h / 2 + 8);
			}
		}
		if (p.breakpoints) dot(ctx, b, theme);
		drawn++;
	}
	return drawn;
}

/** A box filled and outlined as painted (rounded when zoomed in enough to read it), with its ring. */
function box(ctx: CanvasRenderingContext2D, b: Box, p: Paint, px: number, rounded: boolean): void {
	ctx.fillStyle = css(p.fill);
	ctx.strokeStyle = css(p.stroke);
	ctx.lineWidth = Math.max(p.width, px);
	ctx.beginPath();
	if (rounded) ctx.roundRect(b.x, b.y, b.w, b.h, 4);
	else ctx.rect(b.x, b.y, b.w, b.h);
	ctx.fill();
	ctx.stroke();
	if (p.ring) ring(ctx, b, p, px);
}

function ring(ctx: CanvasRenderingContext2D, b: Box, p: Paint, px: number): void {
	ctx.save();
	ctx.strokeStyle = css(p.ring!);
	ctx.lineWidth = Math.max(3, 3 * px);
	if (p.dash) ctx.setLineDash([6, 3]);
	ctx.strokeRect(b.x - 4, b.y - 4, b.w + 8, b.h + 8);
	ctx.restore();
}

function dot(ctx: CanvasRenderingContext2D, b: Box, theme: Theme): void {
	ctx.fillStyle = css(theme.breakpoint);
	ctx.beginPath();
	ctx.arc(b.x, b.y + (b.open ? 12 : b.h / 2), 5.5, 0, 2 * Math.PI);
	ctx.fill();
}

/** The whole scene, small: leaf boxes as dots of their colour (the minimap's picture, drawn once per scene). */
export function drawOverview(ctx: CanvasRenderingContext2D, model: GraphModel, scene: Scene, prepared: Prepared, marks: Marks, theme: Theme, w: number, h: number): { k: number; x: number; y: number } {
	const k = Math.min(w / Math.max(scene.width, 1), h / Math.max(scene.height, 1));
	const x = (w - scene.width * k) / 2;
	const y = (h - scene.height * k) / 2;
	ctx.setTransform(1, 0, 0, 1, 0, 0);
	ctx.clearRect(0, 0, w, h);
	ctx.fillStyle = css(theme.background, 0.85);
	ctx.fillRect(0, 0, w, h);
	for (const b of prepared.order) {
		const p = paint(model, b, marks, theme);
		ctx.fillStyle = css(b.open ? theme.groupBorder : p.fill, b.open ? 0.35 : 1);
		ctx.fillRect(x + b.x * k, y + b.y * k, Math.max(1, b.w * k), Math.max(1, b.h * k));
		if (p.ring && !b.open) {
			ctx.strokeStyle = css(p.ring);
			ctx.lineWidth = 2;
			ctx.strokeRect(x + b.x * k - 2, y + b.y * k - 2, Math.max(1, b.w * k) + 4, Math.max(1, b.h * k) + 4);
		}
	}
	return { k, x, y };
}
