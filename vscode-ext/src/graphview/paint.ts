/**
 * How each shown item looks, for the canvas and for the SVG export alike: its fill, outline and
 * text, from the overlay, the debugger's state and the selection. Pure, unit-tested.
 */
import { Box, moduleDetail } from './layout';
import { GraphModel, Kind } from './model';
import { MARK_COLOR, ORIGIN_COLOR, RGB, SPREAD_COLOR } from './overlay';
import { Theme, category, textOn } from './style';

/** What is marked on the graph besides its structure. */
export interface Marks {
	/** The overlay's colour per item (undefined: no value, drawn as usual). */
	colors?: (RGB | undefined)[];
	/** Items the overlay marks (a first divergence, a first bad node, and the groups that hold one). */
	marked: Set<number>;
	/** Items whose node (or a node inside) holds a NaN/Inf: where it started, where it spread. */
	nonFinite: Map<number, 'origin' | 'spread'>;
	/** The shown item of the current node: the node, or the closed group it is in; -1 when none. */
	current: number;
	/** Shown item -> the breakpoints on it or inside it. */
	breakpoints: Map<number, number>;
	selected: number;
	hover: number;
	/** Search hits (shown items). */
	found: Set<number>;
}

export function emptyMarks(): Marks {
	return { marked: new Set(), nonFinite: new Map(), current: -1, breakpoints: new Map(), selected: -1, hover: -1, found: new Set() };
}

export interface Paint {
	fill: RGB;
	stroke: RGB;
	/** Outline width in world units. */
	width: number;
	/** A dashed outline: a closed group that holds the current node. */
	dash: boolean;
	title: string;
	sub: string;
	text: RGB;
	/** Breakpoints: 0 none; on a group, how many inside. */
	breakpoints: number;
	/** A second, outer ring (the current node, an overlay mark). */
	ring?: RGB;
}

export function paint(model: GraphModel, box: Box, marks: Marks, theme: Theme): Paint {
	const it = model.items[box.item];
	const i = box.item;
	let fill: RGB;
	let title = it.label;
	let sub = '';
	if (box.open) {
		fill = theme.group;
		title = it.kind === Kind.Node ? `${it.label}  ${it.key}` : it.kind === Kind.Module && it.detail ? `${it.label}: ${it.detail}` : it.label;
	} else if (it.kind === Kind.Module) {
		fill = theme.fills.module;
		sub = moduleDetail(it);
	} else if (it.kind === Kind.Input || it.kind === Kind.Output) {
		fill = theme.fills.io;
		sub = it.detail;
	} else {
		fill = theme.fills[model.isConstant(it.row) && category(it.label) !== 'control' ? 'constant' : category(it.label)];
		sub = it.key;
	}
	const overlay = marks.colors?.[i];
	if (overlay && !box.open) fill = overlay;
	const nf = marks.nonFinite.get(i);
	if (nf && !box.open) fill = nf === 'origin' ? ORIGIN_COLOR : SPREAD_COLOR;
	let stroke = box.open ? theme.groupBorder : theme.edge;
	let width = box.open ? 1 : 1;
	let ring: RGB | undefined;
	if (nf && box.open) {
		stroke = nf === 'origin' ? ORIGIN_COLOR : SPREAD_COLOR;
		width = 2;
	}
	if (marks.marked.has(i) && !box.open) ring = MARK_COLOR;
	if (marks.found.has(i)) {
		stroke = theme.selection;
		width = 2;
	}
	if (i === marks.selected) {
		stroke = theme.selection;
		width = 3;
	}
	const dash = i === marks.current && (it.kind === Kind.Module || box.open);
	if (i === marks.current) {
		ring = theme.current;
		if (!box.open) width = Math.max(width, 2);
	}
	return { fill, stroke, width, dash, title, sub, text: box.open ? theme.foreground : textOn(fill), breakpoints: marks.breakpoints.get(i) ?? 0, ring };
}

/** The boxes drawn on top of their group, in drawing order: open groups first (outer before inner), then the rest. */
export function drawOrder(boxes: Box[]): Box[] {
	return [...boxes.filter((b) => b.open), ...boxes.filter((b) => !b.open)];
}
