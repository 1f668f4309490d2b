/**
 * `graph-dap scan` as the extension sees it, independent of VS Code's API: the command line
 * for a source the user picked, the JSON lines the scan prints, and its results grouped by the
 * node where each failing input first goes wrong (the tree view's model).
 */

/** Where a scan's inputs come from, as the user chose them. */
export type ScanSource =
	| { kind: 'folder'; path: string }
	| { kind: 'glob'; pattern: string }
	| { kind: 'samples'; path: string; axis: number; batch?: number }
	| { kind: 'generator'; target: string };

/** One failing input, as scan.json holds it (the fields the extension uses). */
export interface ScanResult {
	index: number;
	id: string;
	status: string;
	message: string;
	node: { id: string; name?: string; op_type: string; index: number; where: string; path: { node: string; attribute: string; iteration: number | null }[] } | null;
	tensor: string | null;
	details: Record<string, unknown>;
	seconds: number;
	replay?: { inputs: string | null; command: string | null; launch: Record<string, unknown> | null; note?: string };
}

/** A line the scan printed with --json: start, result, incident, saved, end. */
export type ScanEvent =
	| { event: 'start'; total: number | null; resumed: number; out: string }
	| ({ event: 'result'; done: number; failed: number } & ScanResult)
	| { event: 'incident'; message: string }
	| { event: 'saved'; done: number }
	| { event: 'end'; results: string; report: string; done: number; failed: number; counts: Record<string, number>; finished: boolean };

/** `python -m graph_dap scan ...` arguments (after the interpreter). */
export function scanArguments(model: string, source: ScanSource, out: string, extra: string[] = []): string[] {
	const args = ['-m', 'graph_dap', 'scan', model];
	switch (source.kind) {
		case 'folder':
			args.push('--inputs', source.path);
			break;
		case 'glob':
			args.push('--inputs', source.pattern);
			break;
		case 'samples':
			args.push('--inputs', source.path, '--sample-axis', String(source.axis));
			if (source.batch && source.batch > 1) {
				args.push('--batch', String(source.batch));
			}
			break;
		case 'generator':
			args.push('--inputs-from', source.target);
			break;
	}
	return [...args, '--out', out, '--json', ...extra];
}

/** Splits a stream of stdout chunks into parsed events (lines that are not JSON are skipped). */
export class EventReader {
	private rest = '';

	constructor(private readonly onEvent: (e: ScanEvent) => void) {}

	push(chunk: string): void {
		const lines = (this.rest + chunk).split('\n');
		this.rest = lines.pop() ?? '';
		for (const line of lines) {
			this.line(line);
		}
	}

	end(): void {
		if (this.rest) {
			this.line(this.rest);
			this.rest = '';
		}
	}

	private line(line: string): void {
		const text = line.trim();
		if (!text.startsWith('{')) {
			return;
		}
		try {
			const e = JSON.parse(text) as ScanEvent;
			if (e && typeof e.event === 'string') {
				this.onEvent(e);
			}
		} catch {
			// a partial or foreign line: not an event
		}
	}
}

/** A tree group: the inputs that first go wrong at one node (or fail without one). */
export interface FailureGroup {
	key: string;
	label: string;
	description: string;
	inputs: ScanResult[];
}

const NO_NODE: Record<string, string> = { invalid: 'inputs that do not fit the model', crash: 'inputs that kill their worker' };

/** Failing results grouped by first bad node, most inputs first; then those without a node. */
export function groupFailures(results: ScanResult[]): FailureGroup[] {
	const groups = new Map<string, FailureGroup>();
	for (const r of results) {
		if (r.status === 'clean') {
			continue;
		}
		const key = r.node ? `node:${r.node.id}` : `status:${r.status}`;
		let g = groups.get(key);
		if (!g) {
			g = { key, label: r.node ? `${r.node.id} (${r.node.op_type})` : NO_NODE[r.status] ?? r.status, description: '', inputs: [] };
			groups.set(key, g);
		}
		g.inputs.push(r);
	}
	const out = [...groups.values()];
	for (const g of out) {
		g.inputs.sort((a, b) => a.index - b.index);
		const by = new Map<string, number>();
		g.inputs.forEach((r) => by.set(r.status, (by.get(r.status) ?? 0) + 1));
		g.description = `${g.inputs.length} input${g.inputs.length === 1 ? '' : 's'}: ${[...by].map(([s, n]) => `${n} ${s}`).join(', ')}`;
	}
	return out.sort((a, b) => Number(a.key.startsWith('status:')) - Number(b.key.startsWith('status:')) || b.inputs.length - a.inputs.length || a.label.localeCompare(b.label));
}

/** What a failing input's tree item says next to its id. */
export function describeFailure(r: ScanResult): string {
	const where = r.node?.path?.length ? ` (iteration ${r.node.path[r.node.path.length - 1].iteration})` : '';
	const count = typeof r.details?.count === 'number' ? ` ${r.details.count}x` : '';
	return `${r.status}${r.tensor ? ` in ${r.tensor}${count}` : ''}${where}`;
}

/** The debug configuration that replays a failing input to its first bad node, or why there is none. */
export function replayConfiguration(r: ScanResult): { config: Record<string, unknown> } | { problem: string } {
	const launch = r.replay?.launch;
	if (!launch) {
		return { problem: r.replay?.note ?? `input ${r.id} (${r.status}) cannot be replayed: ${r.message}` };
	}
	if (!r.replay?.inputs) {
		return { problem: `input ${r.id} was not kept (its feeds are not plain arrays): nothing to replay` };
	}
	return { config: { ...launch } };
}

/** The progress notification's message for a result event. */
export function progressMessage(done: number, total: number | null, failed: number): string {
	return `${total ? `${done}/${total}` : `${done}`} inputs, ${failed} failing`;
}
