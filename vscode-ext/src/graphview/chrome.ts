/**
 * The graph view's controls around the canvas: the toolbar (search, fit, open/close all, overlay,
 * export), the legend, the tooltip and the context menu. DOM only; what they do is the view's.
 */
import type { Overlay } from './doc';
import { ORIGIN_COLOR, RGB, SPREAD_COLOR, MARK_COLOR, Scale, legendText, scaleColor } from './overlay';
import { Theme, css } from './style';

export const CSS = `
body { margin: 0; overflow: hidden; font: 12px var(--vscode-font-family, system-ui, sans-serif); }
body.graph-page { background: #fff; color: #222; }
@media (prefers-color-scheme: dark) { body.graph-page { background: #1e1e1e; color: #ddd; } }
#gv { position: fixed; inset: 0; }
#gv-canvas { position: absolute; left: 0; top: 34px; width: 100%; height: calc(100% - 34px); cursor: grab; outline: none; }
#gv-canvas.dragging { cursor: grabbing; }
.gv-toolbar { position: absolute; left: 0; right: 0; top: 0; height: 34px; display: flex; gap: 6px; align-items: center; padding: 0 8px;
  box-sizing: border-box; border-bottom: 1px solid rgba(128,128,128,.35); background: var(--vscode-editorWidget-background, rgba(128,128,128,.08)); }
.gv-toolbar input, .gv-toolbar select, .gv-toolbar button { font: inherit; color: inherit; background: var(--vscode-input-background, transparent);
  border: 1px solid rgba(128,128,128,.5); border-radius: 3px; padding: 2px 6px; height: 24px; box-sizing: border-box; }
.gv-toolbar button { cursor: pointer; white-space: nowrap; flex: none; background: var(--vscode-button-secondaryBackground, rgba(128,128,128,.12)); }
#gv-search { width: 220px; min-width: 90px; flex: 0 1 220px; }
.gv-toolbar { overflow: hidden; }
#gv-status { margin-left: auto; opacity: .8; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#gv-status.error { color: #e51400; opacity: 1; }
#gv-results { position: absolute; left: 8px; top: 34px; width: 360px; max-height: 50%; overflow: auto; z-index: 3;
  background: var(--vscode-editorWidget-background, #fff); border: 1px solid rgba(128,128,128,.5); }
body.graph-page #gv-results, body.graph-page #gv-menu, body.graph-page #gv-tooltip, body.graph-page #gv-legend { background: #fff; }
@media (prefers-color-scheme: dark) { body.graph-page #gv-results, body.graph-page #gv-menu, body.graph-page #gv-tooltip, body.graph-page #gv-legend { background: #252526; } }
#gv-results div { padding: 3px 8px; cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#gv-results div:hover, #gv-results div.active { background: rgba(0,122,204,.25); }
#gv-results .why { opacity: .7; margin-left: 8px; }
#gv-minimap { position: absolute; right: 10px; bottom: 10px; width: 180px; height: 140px; border: 1px solid rgba(128,128,128,.5); cursor: crosshair; }
#gv-legend { position: absolute; left: 10px; bottom: 10px; max-width: 340px; padding: 6px 8px; border: 1px solid rgba(128,128,128,.4);
  background: var(--vscode-editorWidget-background, rgba(255,255,255,.9)); border-radius: 3px; }
#gv-legend:empty { display: none; }
#gv-legend .title { font-weight: bold; margin-bottom: 3px; }
#gv-legend .bar { height: 10px; margin: 3px 0; border-radius: 2px; }
#gv-legend .ends { display: flex; justify-content: space-between; }
#gv-legend .key { display: flex; align-items: center; gap: 6px; margin-top: 3px; }
#gv-legend .sw { width: 12px; height: 12px; border-radius: 2px; display: inline-block; flex: none; }
#gv-legend .ring { background: transparent !important; border: 3px solid; box-sizing: border-box; }
#gv-tooltip { position: absolute; z-index: 4; pointer-events: none; max-width: 560px; padding: 6px 8px; white-space: pre-wrap; word-break: break-all;
  font-family: var(--vscode-editor-font-family, monospace); font-size: 11.5px;
  background: var(--vscode-editorHoverWidget-background, #fff); border: 1px solid var(--vscode-editorHoverWidget-border, rgba(128,128,128,.6)); }
#gv-menu { position: absolute; z-index: 5; min-width: 180px; padding: 4px 0; background: var(--vscode-menu-background, #fff);
  color: var(--vscode-menu-foreground, inherit); border: 1px solid rgba(128,128,128,.5); box-shadow: 0 2px 8px rgba(0,0,0,.25); }
#gv-menu div { padding: 4px 14px; cursor: pointer; white-space: nowrap; }
#gv-menu div:hover { background: var(--vscode-menu-selectionBackground, rgba(0,122,204,.25)); }
#gv-menu hr { border: none; border-top: 1px solid rgba(128,128,128,.4); margin: 3px 0; }
`;

export function installStyle(): void {
	const sheet = new CSSStyleSheet();
	sheet.replaceSync(CSS);
	document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text = ''): HTMLElementTagNameMap[K] {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
	if (text) e.textContent = text;
	return e;
}

export interface Controls {
	root: HTMLElement;
	canvas: HTMLCanvasElement;
	minimap: HTMLCanvasElement;
	search: HTMLInputElement;
	results: HTMLElement;
	overlay: HTMLSelectElement;
	legend: HTMLElement;
	tooltip: HTMLElement;
	menu: HTMLElement;
	status: HTMLElement;
	buttons: Record<'fit' | 'collapse' | 'expand' | 'svg' | 'png' | 'openOverlay', HTMLButtonElement>;
}

export function buildControls(live: boolean): Controls {
	const root = el('div', { id: 'gv' });
	const bar = el('div', { class: 'gv-toolbar', role: 'toolbar' });
	const search = el('input', { id: 'gv-search', type: 'search', placeholder: 'Search nodes, ops, values', 'aria-label': 'Search nodes and values' });
	const button = (id: string, text: string, title: string) => el('button', { id, title }, text);
	const buttons = {
		fit: button('gv-fit', 'Fit', 'Show the whole graph'),
		collapse: button('gv-collapse', 'Collapse all', 'Close every module'),
		expand: button('gv-expand', 'Expand all', 'Open every module and body'),
		openOverlay: button('gv-open-overlay', 'Overlay…', 'Colour the nodes by a compare --json, profile --json or scan.json file'),
		svg: button('gv-svg', 'SVG', 'Export the shown graph as SVG'),
		png: button('gv-png', 'PNG', 'Export the shown graph as PNG'),
	};
	const overlay = el('select', { id: 'gv-overlay', title: 'Colour the nodes by', 'aria-label': 'Overlay' });
	const status = el('span', { id: 'gv-status', role: 'status' });
	bar.append(search, buttons.fit, buttons.collapse, buttons.expand, overlay);
	if (live) bar.append(buttons.openOverlay);
	bar.append(buttons.svg, buttons.png, status);
	const canvas = el('canvas', { id: 'gv-canvas', tabindex: '0', 'aria-label': 'Graph' });
	const minimap = el('canvas', { id: 'gv-minimap', 'aria-label': 'Minimap' });
	const results = el('div', { id: 'gv-results', role: 'listbox' });
	results.hidden = true;
	const legend = el('div', { id: 'gv-legend' });
	const tooltip = el('div', { id: 'gv-tooltip' });
	tooltip.hidden = true;
	const menu = el('div', { id: 'gv-menu', role: 'menu' });
	menu.hidden = true;
	root.append(bar, canvas, minimap, results, legend, tooltip, menu);
	document.body.append(root);
	return { root, canvas, minimap, search, results, overlay, legend, tooltip, menu, status, buttons };
}

/** The overlay choices: none, then each overlay's metrics. Values are `overlay:metric`. */
export function fillOverlayChoices(select: HTMLSelectElement, overlays: Overlay[], chosen: string): void {
	select.replaceChildren(el('option', { value: '' }, 'No overlay'));
	overlays.forEach((o, i) => {
		for (const m of o.metrics) select.append(el('option', { value: `${i}:${m.key}` }, `${o.kind}: ${m.label}`));
	});
	select.value = chosen;
	select.hidden = overlays.length === 0;
}

export interface LegendState {
	overlay?: { overlay: Overlay; scale: Scale; format: (v: number) => string };
	origin: number;
	spread: number;
	current: string | null;
	breakpoints: number;
	theme: Theme;
}

const swatch = (c: RGB, ring = false) => {
	const s = el('span', { class: ring ? 'sw ring' : 'sw' });
	if (ring) s.style.borderColor = css(c);
	else s.style.background = css(c);
	return s;
};

/** The legend: the overlay's scale and marks, and the keys of the debugger's colours now in use. */
export function renderLegend(box: HTMLElement, st: LegendState): string {
	const parts: HTMLElement[] = [];
	const texts: string[] = [];
	const key = (s: HTMLElement, text: string) => {
		const row = el('div', { class: 'key' });
		row.append(s, document.createTextNode(text));
		parts.push(row);
		texts.push(text);
	};
	if (st.overlay) {
		const { overlay, scale, format } = st.overlay;
		const t = legendText(scale, format);
		const title = el('div', { class: 'title' }, `${overlay.title}`);
		const label = el('div', {}, `${t.label}: ${scale.count} nodes`);
		const bar = el('div', { class: 'bar' });
		bar.style.background = `linear-gradient(to right, ${[0, 0.2, 0.4, 0.6, 0.8, 1].map((x) => css(scaleColor(x))).join(', ')})`;
		const ends = el('div', { class: 'ends' });
		ends.append(el('span', {}, `best ${t.best}`), el('span', {}, `worst ${t.worst}`));
		parts.push(title, label, bar, ends);
		texts.push(overlay.title, t.label, `best ${t.best}`, `worst ${t.worst}`);
		const marks = Object.keys(overlay.marks).length;
		if (marks) key(swatch(MARK_COLOR, true), `${overlay.markLabel ?? 'marked'} (${marks})`);
		const unmatched = (overlay as { unmatched?: number }).unmatched;
		if (unmatched) {
			parts.push(el('div', {}, `${unmatched} of the file's nodes are not in this model`));
		}
		parts.push(el('div', {}, 'a closed module shows its worst node'));
	}
	if (st.origin) key(swatch(ORIGIN_COLOR), `NaN/Inf starts here (${st.origin})`);
	if (st.spread) key(swatch(SPREAD_COLOR), `NaN/Inf spread to (${st.spread})`);
	if (st.current) key(swatch(st.theme.current, true), `current node: ${st.current}`);
	if (st.breakpoints) key(swatch(st.theme.breakpoint), `breakpoints (${st.breakpoints})`);
	box.replaceChildren(...parts);
	return texts.join(' | ');
}

export interface MenuItem {
	label: string;
	run: () => void;
}

/** Shows a context menu at (x, y); `null` entries are separators. */
export function showMenu(menu: HTMLElement, x: number, y: number, items: (MenuItem | null)[]): void {
	menu.replaceChildren(
		...items.map((m) => {
			if (!m) return el('hr');
			const row = el('div', { role: 'menuitem' }, m.label);
			row.addEventListener('click', () => {
				menu.hidden = true;
				m.run();
			});
			return row;
		}),
	);
	menu.hidden = false;
	const r = menu.getBoundingClientRect();
	menu.style.left = `${Math.min(x, window.innerWidth - r.width - 4)}px`;
	menu.style.top = `${Math.min(y, window.innerHeight - r.height - 4)}px`;
}
