/**
 * Reading the graph listing's text (the format is graph_dap's; see PROTOCOL.md): node lines,
 * value names under the cursor, and how to name a value in the adapter's expression language.
 * Pure functions, used for the outline and for debug hovers.
 */

/** One node line: `OUTPUTS = OpType<attrs>(INPUTS)  # NODE_ID`, then maybe `  (constant)` and `  # model.py:25`. */
export interface NodeLine {
	/** The node id after the trailing `#`. */
	nodeId: string;
	opType: string;
	outputs: string[];
	inputs: string[];
	/** Leading spaces (two per subgraph level). */
	indent: number;
}

const NODE_RE = /^(\s*)(.*?)\s=\s([A-Za-z_][\w.]*)(?:<.*>)?\((.*)\)$/;
const TRAILER_RE = /^(.*?\))\s+#\s*(.*?)(?:\s+\(constant\))?(?:\s+#\s+\S[^#]*)?\s*$/;

/** The node on a listing line, or undefined for headers, blank lines and subgraph braces. */
export function parseNodeLine(line: string): NodeLine | undefined {
	if (/^\s*(#|$|return\b|\})/.test(line)) {
		return undefined;
	}
	const t = TRAILER_RE.exec(line);
	const m = NODE_RE.exec(t ? t[1] : line.trimEnd());
	if (!m) {
		return undefined;
	}
	const [, indent, outputs, opType, inputs] = m;
	const nodeId = t ? t[2] : '';
	return {
		indent: indent.length,
		opType,
		nodeId,
		outputs: splitTop(outputs).map((o) => o.replace(/:\s+[A-Za-z]\w*(\[[^\]]*\])?$/, '')).filter((o) => o !== '_'),
		inputs: splitTop(inputs).filter((i) => i !== '' && i !== '_'),
	};
}

/** Splits on commas outside brackets: `a: f[1,2], b` -> [`a: f[1,2]`, `b`]. */
function splitTop(s: string): string[] {
	const out: string[] = [];
	let depth = 0;
	let cur = '';
	for (const ch of s) {
		if (ch === '[' || ch === '(' || ch === '<') depth++;
		if (ch === ']' || ch === ')' || ch === '>') depth--;
		if (ch === ',' && depth === 0) {
			out.push(cur.trim());
			cur = '';
		} else {
			cur += ch;
		}
	}
	if (cur.trim() !== '') out.push(cur.trim());
	return out;
}

/** Characters of a value name; a name neither starts nor ends with `/ . : -`. */
const NAME_RE = /[A-Za-z0-9_](?:[A-Za-z0-9_/.:\-]*[A-Za-z0-9_])?/g;

/** The value name at `character` on a node line (not in its attributes or its trailing id). */
export function valueNameAt(line: string, character: number): { start: number; end: number; name: string } | undefined {
	const node = parseNodeLine(line);
	if (!node) {
		return undefined;
	}
	const names = new Set([...node.outputs, ...node.inputs]);
	for (const m of line.matchAll(NAME_RE)) {
		const start = m.index!;
		const end = start + m[0].length;
		if (character >= start && character <= end && names.has(m[0])) {
			return { start, end, name: m[0] };
		}
	}
	return undefined;
}

/** A value name in the expression language: as it is when it is an identifier, else in backticks. */
export function hoverExpression(name: string): string {
	return /^[A-Za-z_]\w*$/.test(name) ? name : `\`${name}\``;
}
