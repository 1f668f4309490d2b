/** The shown graph as an SVG document (Export SVG): the same paint as the canvas, every shown item. Pure. */
import { Scene } from './layout';
import { GraphModel } from './model';
import { Marks, drawOrder, paint } from './paint';
import { RGB } from './overlay';
import { Theme, css } from './style';

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The SVG path of a polyline drawn smoothly (quadratic curves through the midpoints), as the canvas draws it. */
export function pathData(points: number[]): string {
	if (points.length < 4) return '';
	const f = (v: number) => Math.round(v * 10) / 10;
	let d = `M${f(points[0])},${f(points[1])}`;
	const n = points.length / 2;
	if (n === 2) return d + `L${f(points[2])},${f(points[3])}`;
	for (let i = 1; i < n - 1; i++) {
		const mx = (points[2 * i] + points[2 * i + 2]) / 2;
		const my = (points[2 * i + 1] + points[2 * i + 3]) / 2;
		d += `Q${f(points[2 * i])},${f(points[2 * i + 1])} ${f(mx)},${f(my)}`;
	}
	return d + `L${f(points[points.length - 2])},${f(points[points.length - 1])}`;
}

export function sceneSvg(model: GraphModel, scene: Scene, marks: Marks, theme: Theme, title = ''): string {
	const pad = 16;
	const w = Math.ceil(scene.width + 2 * pad);
	const h = Math.ceil(scene.height + 2 * pad);
	const out: string[] = [
		`<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="${-pad} ${-pad} ${w} ${h}" font-family="sans-serif">`,
		`<title>${esc(title)}</title>`,
		`<rect x="${-pad}" y="${-pad}" width="${w}" height="${h}" fill="${css(theme.background)}"/>`,
		`<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L8,4L0,8z" fill="${css(theme.edge)}"/></marker></defs>`,
	];
	const boxes = drawOrder(scene.boxes).filter((b) => b.item !== 0);
	for (const b of boxes.filter((x) => x.open)) out.push(boxSvg(model, b, marks, theme));
	out.push(`<g fill="none" stroke="${css(theme.edge)}" stroke-width="1.2">`);
	for (const e of scene.edges) out.push(`<path d="${pathData(e.points)}" marker-end="url(#arrow)"/>`);
	out.push('</g>');
	for (const b of boxes.filter((x) => !x.open)) out.push(boxSvg(model, b, marks, theme));
	out.push('</svg>');
	return out.join('\n');
}

function boxSvg(model: GraphModel, b: { item: number; x: number; y: number; w: number; h: number; open: boolean }, marks: Marks, theme: Theme): string {
	const p = paint(model, b as never, marks, theme);
	const key = esc(model.items[b.item].key);
	const parts = [`<g data-item="${key}">`];
	if (p.ring) parts.push(`<rect x="${b.x - 3}" y="${b.y - 3}" width="${b.w + 6}" height="${b.h + 6}" rx="7" fill="none" stroke="${css(p.ring)}" stroke-width="3"${p.dash ? ' stroke-dasharray="6 3"' : ''}/>`);
	parts.push(`<rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="${b.open ? 6 : 4}" fill="${css(p.fill)}" stroke="${css(p.stroke)}" stroke-width="${p.width}"/>`);
	const t = (x: number, y: number, s: string, size: number, color: RGB, weight = 'normal', anchor = 'middle') =>
		`<text x="${x}" y="${y}" font-size="${size}" font-weight="${weight}" fill="${css(color)}" text-anchor="${anchor}">${esc(s)}</text>`;
	if (b.open) parts.push(t(b.x + 8, b.y + 16, p.title, 12, p.text, 'bold', 'start'));
	else {
		parts.push(t(b.x + b.w / 2, b.y + (p.sub ? b.h / 2 - 2 : b.h / 2 + 4), p.title, 12, p.text, 'bold'));
		if (p.sub) parts.push(t(b.x + b.w / 2, b.y + b.h / 2 + 11, clip(p.sub, b.w / 5.6), 9, p.text));
	}
	if (p.breakpoints) parts.push(`<circle cx="${b.x}" cy="${b.y + b.h / 2}" r="5" fill="${css(theme.breakpoint)}"/>`);
	parts.push('</g>');
	return parts.join('');
}

/** `s` cut to about `chars` characters, with an ellipsis. */
export function clip(s: string, chars: number): string {
	const n = Math.max(3, Math.floor(chars));
	return s.length <= n ? s : s.slice(0, n - 1) + '…';
}
