/**
 * The Debug Adapter Protocol's base protocol: `Content-Length: N\r\n\r\n` and N bytes of JSON.
 * No vscode here: the warm adapter (warmAdapter.ts) talks to a started adapter's stdio with it.
 */

/** One message, framed for an adapter's stdin. */
export function frame(message: unknown): Buffer {
	const body = Buffer.from(JSON.stringify(message), 'utf8');
	return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body]);
}

/** Reads the messages out of an adapter's stdout, whatever the chunks it comes in. */
export class FrameReader {
	private buffer: Buffer = Buffer.alloc(0);

	/** The messages that `chunk` completes, in order; an Error for a stream that is not DAP. */
	push(chunk: Buffer): unknown[] {
		this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
		const messages: unknown[] = [];
		for (;;) {
			const end = this.buffer.indexOf('\r\n\r\n');
			if (end < 0) {
				if (this.buffer.length > 4096) {
					throw new Error(`no end of a message header in ${this.buffer.length} bytes`);
				}
				return messages;
			}
			const header = this.buffer.subarray(0, end).toString('ascii');
			const length = /(?:^|\r\n)Content-Length:\s*(\d+)\s*(?:\r\n|$)/i.exec(header);
			if (!length) {
				throw new Error(`a message header without Content-Length: ${JSON.stringify(header.slice(0, 120))}`);
			}
			const start = end + 4;
			const size = Number(length[1]);
			if (this.buffer.length < start + size) {
				return messages;
			}
			const body = this.buffer.subarray(start, start + size).toString('utf8');
			this.buffer = this.buffer.subarray(start + size);
			messages.push(JSON.parse(body));
		}
	}
}
