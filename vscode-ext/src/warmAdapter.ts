/**
 * A debug adapter started ahead: F5 finds `python -m graph_dap.adapter` (and the worker it starts
 * first thing) already up, its imports of numpy, onnx and onnxruntime done, instead of starting
 * two Python processes after the click. One waits at a time: started a moment after the extension
 * activates (a model or a listing was opened) and again when a graph-dap session ends; a session
 * takes it when its interpreter and folder are the ones it was started with, else the adapter is
 * started as usual. One that waited longer than MAX_AGE_MS is not used (graph-dap may have been
 * upgraded meanwhile: it would run the old code), nor one started before the interpreter setting
 * changed. Off with the setting `graphDap.warmStart`.
 */
import { ChildProcess, spawn } from 'node:child_process';
import * as vscode from 'vscode';
import { FrameReader, frame } from './dapFraming';

const TAIL_BYTES = 4096; // what is kept of an adapter's stderr, to say why it ended
const KILL_AFTER_MS = 3000; // after stdin closes, how long an adapter has to end by itself
const MAX_AGE_MS = 15 * 60 * 1000; // an adapter that waited longer is not used

interface Started {
	readonly key: string;
	readonly child: ChildProcess;
	readonly since: number;
	stderr: string;
	failed: boolean;
}

function keyOf(command: string, args: readonly string[], cwd: string | undefined): string {
	return JSON.stringify([command, args, cwd ?? '']);
}

/** Up, and not waiting for too long. */
function usable(s: Started): boolean {
	return !s.failed && s.child.exitCode === null && s.child.signalCode === null && Date.now() - s.since < MAX_AGE_MS;
}

/** The adapter waiting for the next session, if any. */
export class WarmAdapters implements vscode.Disposable {
	private spare: Started | undefined;
	private timer: NodeJS.Timeout | undefined;

	constructor(private readonly enabled: () => boolean) {}

	/** The waiting adapter as the session's adapter, when it was started with this command, arguments and folder. */
	take(command: string, args: readonly string[], cwd: string | undefined): vscode.DebugAdapterInlineImplementation | undefined {
		const spare = this.spare;
		this.spare = undefined;
		if (!spare) {
			return undefined;
		}
		if (spare.key !== keyOf(command, args, cwd) || !usable(spare)) {
			spare.child.kill();
			return undefined;
		}
		return new vscode.DebugAdapterInlineImplementation(new StartedAdapter(spare));
	}

	/** Start an adapter for the next session, after ``delayMs`` (the session or the editor that just opened goes first). */
	prepare(command: string, args: readonly string[], cwd: string | undefined, delayMs = 0): void {
		if (this.timer) {
			clearTimeout(this.timer);
		}
		this.timer = setTimeout(() => {
			this.timer = undefined;
			if (!this.enabled()) {
				return;
			}
			const key = keyOf(command, args, cwd);
			if (this.spare && this.spare.key === key && usable(this.spare)) {
				return;
			}
			this.spare?.child.kill();
			this.spare = start(key, command, args, cwd);
		}, delayMs);
	}

	/** Let the waiting adapter go (the interpreter setting changed: it may not be the one to use). */
	forget(): void {
		this.spare?.child.kill();
		this.spare = undefined;
	}

	dispose(): void {
		if (this.timer) {
			clearTimeout(this.timer);
		}
		this.forget();
	}
}

function start(key: string, command: string, args: readonly string[], cwd: string | undefined): Started {
	const child = spawn(command, [...args], { cwd, stdio: 'pipe', windowsHide: true });
	const started: Started = { key, child, since: Date.now(), stderr: '', failed: false };
	child.on('error', () => {
		started.failed = true; // no such interpreter: the session starts its own, which says so
	});
	child.stderr?.on('data', (chunk: Buffer) => {
		started.stderr = (started.stderr + chunk.toString('utf8')).slice(-TAIL_BYTES);
	});
	child.stdin?.on('error', () => undefined); // an adapter gone before we wrote: its exit says so
	return started;
}

/** DAP over a started adapter's stdin and stdout, for VS Code's inline adapters. */
class StartedAdapter implements vscode.DebugAdapter {
	private readonly sent = new vscode.EventEmitter<vscode.DebugProtocolMessage>();
	readonly onDidSendMessage = this.sent.event;
	private readonly reader = new FrameReader();
	private closing = false;

	constructor(private readonly started: Started) {
		const child = started.child;
		child.stdout?.on('data', (chunk: Buffer) => {
			try {
				for (const message of this.reader.push(chunk)) {
					this.sent.fire(message as vscode.DebugProtocolMessage);
				}
			} catch (e) {
				this.end(`graph-dap: the debug adapter wrote something that is not DAP (${(e as Error).message})`);
				child.kill();
			}
		});
		child.on('exit', (code, signal) => {
			if (!this.closing) {
				const tail = started.stderr.trim();
				this.end(`graph-dap: the debug adapter ended (${signal ?? `exit code ${code}`})${tail ? `:\n${tail}` : ''}`);
			}
		});
	}

	handleMessage(message: vscode.DebugProtocolMessage): void {
		const m = message as { type?: string; command?: string };
		if (m.type === 'request' && m.command === 'disconnect') {
			this.closing = true; // the adapter ends after answering it
		}
		const stdin = this.started.child.stdin;
		if (stdin && stdin.writable) {
			stdin.write(frame(message));
		}
	}

	/** What the session shows when the adapter went away under it: the reason, then the end of the session. */
	private end(text: string): void {
		this.closing = true;
		this.sent.fire({ seq: 0, type: 'event', event: 'output', body: { category: 'stderr', output: `${text}\n` } } as vscode.DebugProtocolMessage);
		this.sent.fire({ seq: 0, type: 'event', event: 'terminated' } as vscode.DebugProtocolMessage);
	}

	dispose(): void {
		this.closing = true;
		const child = this.started.child;
		child.stdin?.end();
		if (child.exitCode === null && child.signalCode === null) {
			const timer = setTimeout(() => child.kill(), KILL_AFTER_MS);
			child.once('exit', () => clearTimeout(timer));
		}
		this.sent.dispose();
	}
}
