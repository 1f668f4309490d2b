import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { FrameReader, frame } from '../dapFraming';

test('a framed message reads back, whatever the chunks it comes in', () => {
	const messages = [
		{ seq: 1, type: 'event', event: 'output', body: { output: 'héllo – ✓\n' } },
		{ seq: 2, type: 'response', request_seq: 1, command: 'initialize', success: true, body: {} },
	];
	const bytes = Buffer.concat(messages.map(frame));
	for (const size of [1, 3, 7, 64, bytes.length]) {
		const reader = new FrameReader();
		const got: unknown[] = [];
		for (let i = 0; i < bytes.length; i += size) {
			got.push(...reader.push(bytes.subarray(i, i + size)));
		}
		assert.deepEqual(got, messages, `chunks of ${size}`);
	}
});

test('the length counts bytes, not characters', () => {
	const framed = frame({ text: 'ü' }).toString('utf8');
	assert.ok(framed.startsWith('Content-Length: 13\r\n\r\n'), framed);
});

test('a stream that is not DAP is an error, not a hang', () => {
	assert.throws(() => new FrameReader().push(Buffer.from('Traceback (most recent call last):\r\n\r\n')), /without Content-Length/);
	assert.throws(() => new FrameReader().push(Buffer.alloc(5000, 'x')), /no end of a message header/);
});
