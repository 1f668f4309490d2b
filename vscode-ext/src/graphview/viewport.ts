/** Pan and zoom: screen = world * k + (x, y). Pure, unit-tested. */

export interface Viewport {
	k: number;
	x: number;
	y: number;
}

export const MIN_ZOOM = 0.01;
export const MAX_ZOOM = 4;

/** The viewport that shows the box (wx, wy, ww, wh) whole in a screen of w x h, with a margin, at most at zoom `max`. */
export function fitBox(wx: number, wy: number, ww: number, wh: number, w: number, h: number, margin = 24, max = 1): Viewport {
	const k = clampZoom(Math.min((w - 2 * margin) / Math.max(ww, 1), (h - 2 * margin) / Math.max(wh, 1), max));
	return { k, x: (w - ww * k) / 2 - wx * k, y: (h - wh * k) / 2 - wy * k };
}

/** Zoom by `factor` keeping the world point under the screen point (sx, sy) still. */
export function zoomAt(vp: Viewport, sx: number, sy: number, factor: number): Viewport {
	const k = clampZoom(vp.k * factor);
	const f = k / vp.k;
	return { k, x: sx - (sx - vp.x) * f, y: sy - (sy - vp.y) * f };
}

/** The viewport that centres the world point (wx, wy) in a screen of w x h, zoom kept. */
export function centreOn(vp: Viewport, wx: number, wy: number, w: number, h: number): Viewport {
	return { k: vp.k, x: w / 2 - wx * vp.k, y: h / 2 - wy * vp.k };
}

export function toWorld(vp: Viewport, sx: number, sy: number): [number, number] {
	return [(sx - vp.x) / vp.k, (sy - vp.y) / vp.k];
}

export function toScreen(vp: Viewport, wx: number, wy: number): [number, number] {
	return [wx * vp.k + vp.x, wy * vp.k + vp.y];
}

/** Whether the world box is (partly) inside the screen of w x h. */
export function visible(vp: Viewport, bx: number, by: number, bw: number, bh: number, w: number, h: number): boolean {
	const x = bx * vp.k + vp.x;
	const y = by * vp.k + vp.y;
	return x + bw * vp.k >= 0 && y + bh * vp.k >= 0 && x <= w && y <= h;
}

export function clampZoom(k: number): number {
	return Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, k));
}

/** Distance from (px, py) to a polyline (x, y pairs). */
export function distanceToPolyline(points: number[], px: number, py: number): number {
	let best = Infinity;
	for (let i = 0; i + 3 < points.length; i += 2) {
		const [x1, y1, x2, y2] = [points[i], points[i + 1], points[i + 2], points[i + 3]];
		const dx = x2 - x1;
		const dy = y2 - y1;
		const len = dx * dx + dy * dy;
		const t = len > 0 ? Math.max(0, Math.min(1, ((px - x1) * dx + (py - y1) * dy) / len)) : 0;
		const cx = x1 + t * dx - px;
		const cy = y1 + t * dy - py;
		best = Math.min(best, Math.sqrt(cx * cx + cy * cy));
	}
	return best;
}
