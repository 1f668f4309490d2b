/**
 * What the extension passes between the debug adapter and the listing's language server, independent
 * of VS Code's API so that it can be unit-tested (the contract is in PROTOCOL.md):
 * the settings the server takes, the debug state a DAP message means, and the answer to the
 * server's `graphDap/liveSummaries` request built from the adapter's `graphDap/summaries`.
 */

/** The server's settings (its `initializationOptions` and `workspace/didChangeConfiguration`). */
export interface ServerSettings {
	providers: string[];
	typeHints: boolean;
	liveInlayHints: boolean;
	codeLens: boolean;
}

/** Reads the `graphDap.listing.*` settings through `get` (VS Code's `WorkspaceConfiguration.get`). */
export function serverSettings(get: <T>(key: string, fallback: T) => T): ServerSettings {
	const providers = get<unknown>('listing.providers', ['CPUExecutionProvider']);
	return {
		providers: Array.isArray(providers) && providers.every((p) => typeof p === 'string') && providers.length ? providers : ['CPUExecutionProvider'],
		typeHints: get<boolean>('listing.typeHints', true) !== false,
		liveInlayHints: get<boolean>('listing.liveInlayHints', false) === true,
		codeLens: get<boolean>('listing.codeLens', false) === true,
	};
}

export type DebugState = 'stopped' | 'running' | 'ended';

/** Requests that set the model running again. */
const RESUMING = new Set(['continue', 'next', 'stepIn', 'stepOut', 'stepBack', 'reverseContinue', 'goto', 'restart', 'graphDap/runTo']);

/** The debug state a message from the adapter says (`stopped`, `terminated`...), if it says one. */
export function stateFromAdapter(message: { type?: string; event?: string }): DebugState | undefined {
	if (message.type !== 'event') {
		return undefined;
	}
	if (message.event === 'stopped') {
		return 'stopped';
	}
	if (message.event === 'continued') {
		return 'running';
	}
	return message.event === 'terminated' || message.event === 'exited' ? 'ended' : undefined;
}

/** The debug state a request from VS Code to the adapter starts (`continue`, `next`...), if any. */
export function stateFromClient(message: { type?: string; command?: string }): DebugState | undefined {
	return message.type === 'request' && message.command !== undefined && RESUMING.has(message.command) ? 'running' : undefined;
}

/** One value's live summary, as the adapter's `graphDap/summaries` gives it. */
export interface LiveSummary {
	name: string;
	text: string;
	available: boolean;
	stale?: boolean;
}

/** The answer to `graphDap/liveSummaries`: the adapter's summaries of the names asked, or none. */
export function liveAnswer(names: unknown, body: unknown): { summaries: LiveSummary[] } {
	const asked = new Set(Array.isArray(names) ? names.filter((n): n is string => typeof n === 'string') : []);
	const items = body && typeof body === 'object' && Array.isArray((body as { summaries?: unknown }).summaries) ? (body as { summaries: unknown[] }).summaries : [];
	const out: LiveSummary[] = [];
	for (const item of items) {
		if (!item || typeof item !== 'object') {
			continue;
		}
		const s = item as Record<string, unknown>;
		if (typeof s.name === 'string' && asked.has(s.name) && typeof s.text === 'string') {
			out.push({ name: s.name, text: s.text, available: s.available !== false, stale: s.stale === true });
		}
	}
	return { summaries: out };
}

/** Whether two file paths name the same file (case-insensitively on Windows and macOS). */
export function samePath(a: string, b: string, caseInsensitive: boolean): boolean {
	const norm = (p: string) => {
		const slashes = p.replace(/\\/g, '/').replace(/\/+$/, '');
		return caseInsensitive ? slashes.toLowerCase() : slashes;
	};
	return norm(a) === norm(b);
}
