/**
 * What the user does on the graph view: click (select, open a module, toggle a breakpoint on a
 * node's left edge, view a value's tensor), drag and wheel (pan, zoom), the context menu (Run to
 * Here, Jump to Here...), hover (the node's line, its values' summaries while stopped), search, the
 * minimap and the toolbar's buttons.
 */
import { MenuItem, showMenu } from './chrome';
import { Kind } from './model';
import { formatNumber, GraphView } from './view';
import { Viewport, centreOn, zoomAt } from './viewport';

export function wireInput(view: GraphView): void {
	const { canvas, minimap, search, buttons, overlay, menu } = view.c;
	let drag: { x: number; y: number; vp: Viewport; moved: boolean } | undefined;
	canvas.addEventListener('mousedown', (e) => {
		if (e.button !== 0) return;
		menu.hidden = true;
		drag = { x: e.clientX, y: e.clientY, vp: view.vp, moved: false };
	});
	window.addEventListener('mousemove', (e) => {
		if (drag && (e.buttons & 1)) {
			const dx = e.clientX - drag.x;
			const dy = e.clientY - drag.y;
			if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
			if (drag.moved) {
				canvas.classList.add('dragging');
				view.c.tooltip.hidden = true;
				view.vp = { k: drag.vp.k, x: drag.vp.x + dx, y: drag.vp.y + dy };
				view.invalidate();
			}
		}
	});
	window.addEventListener('mouseup', (e) => {
		const d = drag;
		drag = undefined;
		canvas.classList.remove('dragging');
		if (d && !d.moved && e.target === canvas) click(view, e);
	});
	canvas.addEventListener('mousemove', (e) => {
		if (!drag?.moved && view.model) hover(view, e);
	});
	canvas.addEventListener('mouseleave', () => (view.c.tooltip.hidden = true));
	canvas.addEventListener('dblclick', (e) => {
		const { box } = view.hit(e.offsetX, e.offsetY);
		if (box && !box.open && view.model!.items[box.item].expandable) view.toggle(box.item, true);
	});
	canvas.addEventListener('contextmenu', (e) => contextMenu(view, e));
	canvas.addEventListener(
		'wheel',
		(e) => {
			e.preventDefault();
			const factor = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
			view.vp = zoomAt(view.vp, e.offsetX, e.offsetY, factor);
			view.invalidate();
		},
		{ passive: false },
	);
	canvas.addEventListener('keydown', (e) => {
		const step = 60;
		if (e.key === 'ArrowLeft') view.vp = { ...view.vp, x: view.vp.x + step };
		else if (e.key === 'ArrowRight') view.vp = { ...view.vp, x: view.vp.x - step };
		else if (e.key === 'ArrowUp') view.vp = { ...view.vp, y: view.vp.y + step };
		else if (e.key === 'ArrowDown') view.vp = { ...view.vp, y: view.vp.y - step };
		else if (e.key === '+' || e.key === '=') view.vp = zoomAt(view.vp, canvas.clientWidth / 2, canvas.clientHeight / 2, 1.25);
		else if (e.key === '-') view.vp = zoomAt(view.vp, canvas.clientWidth / 2, canvas.clientHeight / 2, 0.8);
		else if (e.key === 'F9' && view.marks.selected >= 0) {
			const id = view.nodeId(view.marks.selected);
			if (id && view.host.live) view.host.post({ type: 'toggleBreakpoint', node: id });
		} else return;
		e.preventDefault();
		view.invalidate();
	});
	const pan = (e: MouseEvent) => {
		if (!view.overview) return;
		const { k, x, y } = view.overview;
		const r = minimap.getBoundingClientRect();
		view.vp = centreOn(view.vp, (e.clientX - r.left - x) / k, (e.clientY - r.top - y) / k, canvas.clientWidth, canvas.clientHeight);
		view.invalidate();
	};
	minimap.addEventListener('mousedown', (e) => {
		pan(e);
		const move = (m: MouseEvent) => pan(m);
		window.addEventListener('mousemove', move);
		window.addEventListener('mouseup', () => window.removeEventListener('mousemove', move), { once: true });
	});
	search.addEventListener('input', () => runSearch(view));
	search.addEventListener('keydown', (e) => {
		if (e.key === 'Enter') {
			const first = view.model?.search(search.value, 1)[0];
			if (first) view.pick(view.model!.doc.nodes[first.row][0]);
		} else if (e.key === 'Escape') {
			search.value = '';
			runSearch(view);
		}
	});
	search.addEventListener('blur', () => setTimeout(() => (view.c.results.hidden = true), 150));
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
	buttons.fit.addEventListener('click', () => view.fit());
	buttons.collapse.addEventListener('click', () => view.setAll(false));
	buttons.expand.addEventListener('click', () => view.setAll(true));
	buttons.openOverlay.addEventListener('click', () => view.host.post({ type: 'openOverlay' }));
	buttons.svg.addEventListener('click', () => view.host.post({ type: 'export', format: 'svg', data: view.exportSvg() }));
	buttons.png.addEventListener('click', () => view.host.post({ type: 'export', format: 'png', data: view.exportPng() }));
	overlay.addEventListener('change', () => {
		view.overlayChoice = overlay.value;
		view.updateMarks();
	});
}

function click(view: GraphView, e: MouseEvent): void {
	const { box, edge } = view.hit(e.offsetX, e.offsetY);
	if (edge !== undefined) {
		const value = view.model!.doc.values[view.scene!.edges[edge].values[0]][0];
		if (view.host.live) view.host.post({ type: 'viewTensor', value });
		return;
	}
	if (!box) return;
	const it = view.model!.items[box.item];
	if (box.open) {
		if (e.offsetY <= (box.y + 24) * view.vp.k + view.vp.y && it.expandable) view.toggle(box.item, false);
		return;
	}
	const id = view.nodeId(box.item);
	if (id && view.host.live && e.offsetX - (box.x * view.vp.k + view.vp.x) < Math.max(12, 14 * view.vp.k)) {
		view.host.post({ type: 'toggleBreakpoint', node: id });
		return;
	}
	if (it.kind === Kind.Module) {
		view.toggle(box.item, true);
		return;
	}
	view.marks.selected = box.item;
	if (id) {
		document.body.dataset.selected = id;
		view.host.post({ type: 'select', node: id });
	}
	view.invalidate();
}

function contextMenu(view: GraphView, e: MouseEvent): void {
	e.preventDefault();
	const { box, edge } = view.hit(e.offsetX, e.offsetY);
	const items: (MenuItem | null)[] = [];
	const live = view.host.live;
	if (edge !== undefined) {
		for (const v of view.scene!.edges[edge].values) {
			const value = view.model!.doc.values[v][0];
			if (live) items.push({ label: `View Tensor: ${value}`, run: () => view.host.post({ type: 'viewTensor', value }) });
			items.push({ label: `Copy name: ${value}`, run: () => void navigator.clipboard?.writeText(value) });
		}
	} else if (box) {
		const it = view.model!.items[box.item];
		const id = view.nodeId(box.item);
		if (id && live) {
			items.push({ label: 'Run to Here', run: () => view.host.post({ type: 'runTo', node: id }) });
			items.push({ label: 'Jump to Here', run: () => view.host.post({ type: 'jumpTo', node: id }) });
			items.push({ label: 'Toggle Breakpoint', run: () => view.host.post({ type: 'toggleBreakpoint', node: id }) });
			items.push(null);
			for (const v of view.model!.doc.nodes[it.row][6]) {
				const value = view.model!.doc.values[v][0];
				items.push({ label: `View Tensor: ${value}`, run: () => view.host.post({ type: 'viewTensor', value }) });
			}
			items.push({ label: 'Reveal in Listing', run: () => view.host.post({ type: 'select', node: id }) });
		}
		if (it.expandable) items.push({ label: box.open ? 'Close' : 'Open', run: () => view.toggle(box.item, !box.open) });
		if (id) items.push({ label: `Copy id: ${id}`, run: () => void navigator.clipboard?.writeText(id) });
	}
	if (items.length) showMenu(view.c.menu, e.clientX, e.clientY, items);
}

function hover(view: GraphView, e: MouseEvent): void {
	const { box, edge } = view.hit(e.offsetX, e.offsetY);
	const tip = view.c.tooltip;
	const m = view.model!;
	const item = box?.item ?? -1;
	if (item !== view.marks.hover) {
		view.marks.hover = item;
		view.invalidate();
	}
	let text = '';
	let names: string[] = [];
	if (edge !== undefined) {
		const values = view.scene!.edges[edge].values.map((v) => m.doc.values[v]);
		text = values.map(([name, type]) => `${name}: ${type}`).join('\n') + (view.host.live ? '\n(click: view the tensor)' : '');
		names = values.map(([name]) => name);
	} else if (box) {
		const it = m.items[box.item];
		if (it.kind === Kind.Node) {
			const row = m.doc.nodes[it.row];
			text = `${it.key} (${it.label})\n${m.lineText(it.row)}`;
			names = row[6].map((v) => m.doc.values[v][0]);
		} else if (it.kind === Kind.Module) {
			text = `${it.chunk ? 'nodes in run order' : 'module'} ${it.label}${it.detail ? `: ${it.detail}` : ''}\n${it.nodes} nodes — click to ${box.open ? 'close (on its title)' : 'open'}`;
		} else if (it.kind === Kind.Input || it.kind === Kind.Output) {
			text = `${it.kind === Kind.Input ? 'input' : 'output'} ${it.label}: ${it.detail}`;
			names = [it.label];
		} else text = it.label;
		const [oi] = view.overlayChoice.split(':');
		const o = view.overlayChoice ? view.overlays[Number(oi)] : undefined;
		const v = it.kind === Kind.Node && o ? o.values[it.key] : undefined;
		if (v) text += `\n${o!.kind}: ${Object.entries(v).map(([k, x]) => `${k}=${typeof x === 'number' ? formatNumber(x) : x}`).join(' ')}`;
		if (it.kind === Kind.Node && o?.marks[it.key]) text += `\n${o.marks[it.key]}`;
		if (it.kind === Kind.Node && view.debug.origin.includes(it.key)) text += '\nNaN/Inf starts here';
		else if (it.kind === Kind.Node && view.debug.spread.includes(it.key)) text += '\nNaN/Inf spread here';
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
	window.clearTimeout(view.hoverTimer);
	if (view.host.live && view.debug.phase === 'stopped' && names.length) {
		const request = ++view.summaryRequest;
		view.hoverTimer = window.setTimeout(() => view.host.post({ type: 'summaries', request, names }), 120);
	}
}

function runSearch(view: GraphView): void {
	const box = view.c.results;
	const q = view.c.search.value;
	const hits = view.model ? view.model.search(q) : [];
	view.marks.found = new Set(hits.map((h) => view.scene!.shownAs[view.model!.nodeItem[h.row]]));
	box.replaceChildren(
		...hits.map((h, k) => {
			const row = document.createElement('div');
			row.setAttribute('role', 'option');
			const [id, op] = view.model!.doc.nodes[h.row];
			row.textContent = `${id} (${op})`;
			const why = document.createElement('span');
			why.className = 'why';
			why.textContent = h.why;
			row.append(why);
			if (k === 0) row.classList.add('active');
			row.addEventListener('mousedown', (e) => {
				e.preventDefault();
				view.pick(id);
			});
			return row;
		}),
	);
	box.hidden = !q || hits.length === 0;
	document.body.dataset.found = String(hits.length);
	view.invalidate();
}
