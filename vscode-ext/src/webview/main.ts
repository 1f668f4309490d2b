/**
 * The tensor viewer's page: draws what the extension posts ({@link ToWebview}) and sends back
 * the slice indices the user picks.
 */
import type { FromWebview, TensorViewBody, ToWebview } from '../tensorProtocol';
import {
	NAN_COLOR,
	NEGINF_COLOR,
	POSINF_COLOR,
	RGB,
	cellPosition,
	colormap,
	finiteRange,
	formatNumber,
	heatmapPixels,
	histogramBars,
	leadingAxes,
	scaleRange,
	sliceLabel,
	toMatrix,
} from './render';

declare function acquireVsCodeApi(): { postMessage(m: FromWebview): void; getState(): unknown; setState(s: unknown): void };

const vscode = acquireVsCodeApi();
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

let current: { body: TensorViewBody; matrix: number[][] } | undefined;

window.addEventListener('message', (e: MessageEvent<ToWebview>) => {
	const m = e.data;
	if (m.type === 'data') {
		status('');
		render(m.body);
	} else if (m.type === 'error') {
		status(m.message, true);
	} else if (m.type === 'status') {
		status(m.text);
	}
});
$('logscale').addEventListener('change', () => current && drawHistogram(current.body));
window.addEventListener('resize', () => current && render(current.body));
vscode.postMessage({ type: 'ready' });

function status(text: string, error = false): void {
	const el = $('status');
	el.textContent = text;
	el.className = error ? 'error' : '';
}

const css = (c: RGB) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`;

function render(body: TensorViewBody): void {
	const matrix = toMatrix(body.data);
	current = { body, matrix };
	document.body.dataset.tensor = body.name;
	$('title').textContent = body.name;
	const sliced = body.index.length > 0 || body.stride.some((s) => s > 1);
	$('subtitle').textContent =
		`${body.dtype}[${body.shape.join(', ')}]` + (sliced ? `  slice ${sliceLabel(body.shape, body.index, body.stride)}` : '') +
		(body.stride.some((s) => s > 1) ? `  (downsampled by ${body.stride.join(' x ')})` : '');
	$('maps').hidden = false;
	$('histogram-section').hidden = false;
	renderIndices(body);
	drawHeatmap(body, matrix);
	renderStats(body);
	drawHistogram(body);
}

function renderIndices(body: TensorViewBody): void {
	const box = $('indices');
	const axes = leadingAxes(body.shape);
	const existing = box.querySelectorAll('input');
	if (existing.length !== axes.length) {
		box.replaceChildren();
		axes.forEach((size, axis) => {
			const label = document.createElement('label');
			label.textContent = `${axis === 0 && axes.length === 2 ? 'batch' : axis === axes.length - 1 ? 'channel' : `axis ${axis}`} `;
			const input = document.createElement('input');
			input.type = 'number';
			input.min = '0';
			input.step = '1';
			input.dataset.axis = String(axis);
			input.addEventListener('change', sendIndex);
			label.append(input, document.createTextNode(` / ${size}`));
			box.append(label);
		});
	}
	box.querySelectorAll('input').forEach((input, axis) => {
		input.max = String(Math.max(0, axes[axis] - 1));
		if (document.activeElement !== input) {
			input.value = String(body.index[axis] ?? 0);
		}
	});
	box.hidden = axes.length === 0;
}

function sendIndex(): void {
	if (!current) {
		return;
	}
	const axes = leadingAxes(current.body.shape);
	const index = Array.from($('indices').querySelectorAll('input')).map((input, axis) => {
		const v = Math.trunc(Number(input.value));
		return Math.min(Math.max(0, Number.isFinite(v) ? v : 0), Math.max(0, axes[axis] - 1));
	});
	vscode.postMessage({ type: 'setIndex', index });
}

function drawHeatmap(body: TensorViewBody, matrix: number[][]): void {
	const range = finiteRange(matrix);
	const map = body.colorMap === 'diverging' ? 'diverging' : 'sequential';
	const ends = scaleRange(range.lo, range.hi, map);
	const { width, height, pixels } = heatmapPixels(matrix, ends.lo, ends.hi, map);
	const canvas = $<HTMLCanvasElement>('heatmap');
	const avail = Math.max(120, Math.min(document.body.clientWidth - 260, 480));
	const scale = Math.max(1, Math.floor(avail / Math.max(width, height, 1)));
	canvas.width = Math.max(1, width * scale);
	canvas.height = Math.max(1, height * scale);
	const ctx = canvas.getContext('2d')!;
	ctx.imageSmoothingEnabled = false;
	if (width > 0 && height > 0) {
		const src = document.createElement('canvas');
		src.width = width;
		src.height = height;
		src.getContext('2d')!.putImageData(new ImageData(pixels, width, height), 0, 0);
		ctx.drawImage(src, 0, 0, canvas.width, canvas.height);
	}
	canvas.dataset.rows = String(height);
	canvas.dataset.cols = String(width);
	canvas.onmousemove = (e) => showTooltip(e, body, matrix, scale);
	canvas.onmouseleave = () => ($('tooltip').hidden = true);

	const bar = $<HTMLCanvasElement>('colorbar');
	bar.width = 16;
	bar.height = canvas.height;
	const bctx = bar.getContext('2d')!;
	for (let y = 0; y < bar.height; y++) {
		bctx.fillStyle = css(colormap(1 - y / Math.max(1, bar.height - 1), map));
		bctx.fillRect(0, y, bar.width, 1);
	}
	$('scale').style.height = `${canvas.height}px`;
	$('scale-max').textContent = formatNumber(ends.hi);
	$('scale-min').textContent = formatNumber(ends.lo);
	const legend = $('legend');
	const items: [string, RGB, string][] = [
		['NaN', NAN_COLOR, `${range.nan} in this slice`],
		['+Inf', POSINF_COLOR, `${range.posinf} in this slice`],
		['-Inf', NEGINF_COLOR, `${range.neginf} in this slice`],
	];
	if (map === 'diverging') {
		items.unshift(
			['above 0', colormap(1, map), 'quantized above the reference'],
			['0', colormap(0.5, map), 'equal'],
			['below 0', colormap(0, map), 'quantized below the reference'],
		);
	}
	legend.replaceChildren(
		...items.map(([name, color, text]) => {
			const item = document.createElement('span');
			item.className = 'legend-item';
			const sw = document.createElement('span');
			sw.className = 'swatch';
			sw.style.background = css(color);
			item.append(sw, document.createTextNode(`${name}: ${text}`));
			return item;
		}),
	);
}

function showTooltip(e: MouseEvent, body: TensorViewBody, matrix: number[][], scale: number): void {
	const col = Math.floor(e.offsetX / scale);
	const row = Math.floor(e.offsetY / scale);
	const v = matrix[row]?.[col];
	const tip = $('tooltip');
	if (v === undefined) {
		tip.hidden = true;
		return;
	}
	const pos = cellPosition(body.index, body.stride, row, col, body.sliceShape.length);
	const block = body.stride.some((st) => st > 1) ? `  (mean of a ${body.stride.join('x')} block)` : '';
	tip.textContent = `${body.name}[${pos.join(', ')}] = ${formatNumber(v)}${block}`;
	tip.style.left = `${e.pageX + 12}px`;
	tip.style.top = `${e.pageY + 12}px`;
	tip.hidden = false;
}

function renderStats(body: TensorViewBody): void {
	const rows: [string, string, string?][] = [
		['dtype', body.dtype],
		['shape', `[${body.shape.join(', ')}]`],
		['min', formatNumber(body.min)],
		['max', formatNumber(body.max)],
		['mean', formatNumber(body.mean)],
		['NaN', String(body.nan), body.nan ? 'bad' : undefined],
		['+Inf', String(body.posinf), body.posinf ? 'bad' : undefined],
		['-Inf', String(body.neginf), body.neginf ? 'bad' : undefined],
	];
	const caption = document.createElement('caption');
	caption.textContent = 'whole tensor';
	$('stats').replaceChildren(
		caption,
		...rows.map(([k, v, cls]) => {
			const tr = document.createElement('tr');
			const th = document.createElement('th');
			th.textContent = k;
			const td = document.createElement('td');
			td.textContent = v;
			td.dataset.stat = k;
			if (cls) td.className = cls;
			tr.append(th, td);
			return tr;
		}),
	);
}

function drawHistogram(body: TensorViewBody): void {
	const canvas = $<HTMLCanvasElement>('histogram');
	canvas.width = Math.max(200, Math.min(document.body.clientWidth - 40, 720));
	canvas.height = 140;
	const ctx = canvas.getContext('2d')!;
	ctx.clearRect(0, 0, canvas.width, canvas.height);
	const { edges, counts } = body.histogram ?? { edges: [], counts: [] };
	const bars = histogramBars(counts, canvas.width, canvas.height, $<HTMLInputElement>('logscale').checked);
	ctx.fillStyle = getComputedStyle(document.body).getPropertyValue('--vscode-charts-blue') || '#3794ff';
	for (const b of bars) {
		ctx.fillRect(b.x, b.y, b.width, b.height);
	}
	canvas.dataset.bins = String(counts.length);
	$('histogram-axis').textContent = edges.length ? `${formatNumber(edges[0])} .. ${formatNumber(edges[edges.length - 1])}   (${counts.reduce((a, b) => a + b, 0)} finite values)` : 'no finite values';
}
