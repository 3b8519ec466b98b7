import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  BodyReadTimeout,
  discardBody,
  markServerFramedBody,
  readBoundedBytes,
  readBoundedText,
} from '../../src/core/bounded-body.ts';

const encoder = new TextEncoder();

/** A body of the given chunks that records whether it was cancelled and how much was pulled. */
function chunkedBody(chunks: string[], options: { stallAfter?: number; failAfter?: number } = {}) {
  const seen = { pulled: 0, cancelled: false };
  let index = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index === options.failAfter) {
        controller.error(new TypeError('connection reset'));
        return;
      }
      if (index === options.stallAfter) return new Promise<void>(() => {});
      if (index === chunks.length) {
        controller.close();
        return;
      }
      const chunk = encoder.encode(chunks[index++]);
      seen.pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
    cancel() {
      seen.cancelled = true;
    },
  }, { highWaterMark: 0 });
  return { stream, seen };
}

function message(body: ReadableStream<Uint8Array> | null, headers: HeadersInit = {}) {
  return { headers: new Headers(headers), body };
}

test('several chunks are joined in order, within the limit', async () => {
  const { stream } = chunkedBody(['ab', 'cd', 'ef']);
  assert.equal(await readBoundedText(message(stream), 6), 'abcdef');
});

test('a body passing the limit mid-way is undefined, and its stream is cancelled', async () => {
  const { stream, seen } = chunkedBody(['aaaa', 'bbbb', 'cccc', 'dddd']);
  assert.equal(await readBoundedBytes(message(stream), 6), undefined);
  assert.equal(seen.cancelled, true);
  assert.ok(seen.pulled <= 8, `pulled ${seen.pulled}`);
});

test('a Content-Length past the limit is refused unread', async () => {
  const { stream, seen } = chunkedBody(['x']);
  assert.equal(await readBoundedBytes(message(stream, { 'Content-Length': '7' }), 6), undefined);
  assert.equal(seen.pulled, 0);
});

test('no body reads as empty', async () => {
  assert.deepEqual(await readBoundedBytes(message(null), 6), new Uint8Array(0));
});

test('a stalled body rejects with BodyReadTimeout after timeoutMs, and its stream is cancelled', async () => {
  const { stream, seen } = chunkedBody(['ab', 'cd'], { stallAfter: 1 });
  const started = Date.now();
  const error = await readBoundedBytes(message(stream), 100, { timeoutMs: 50 }).catch((e) => e);
  assert.ok(error instanceof BodyReadTimeout, String(error));
  assert.equal(error.timeoutMs, 50);
  assert.ok(Date.now() - started < 2000);
  assert.equal(seen.cancelled, true);
});

test('a body that fails mid-way rejects with the stream error, not a timeout', async () => {
  const { stream } = chunkedBody(['ab', 'cd'], { failAfter: 1 });
  const error = await readBoundedBytes(message(stream), 100, { timeoutMs: 5000 }).catch((e) => e);
  assert.ok(error instanceof TypeError);
  assert.equal(error.message, 'connection reset');
});

test('discardBody cancels an unread body and never throws, even on a locked one', async () => {
  const { stream, seen } = chunkedBody(['ab']);
  discardBody(message(stream));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(seen.cancelled, true);
  const { stream: locked } = chunkedBody(['ab']);
  locked.getReader();
  assert.doesNotThrow(() => discardBody(message(locked)));
});

/**
 * A request as a serving helper marks it: its `arrayBuffer()` and `text()` are the runtime's
 * whole read (here answering `delivered`, or never), its stream is counted if anything reads it
 * instead.
 */
function framedMessage(
  headers: HeadersInit,
  delivered: string | undefined,
  chunks: string[] = [delivered ?? ''],
) {
  const { stream, seen } = chunkedBody(chunks);
  const record = { wholeReads: 0, textReads: 0, abandoned: 0, streamRead: () => seen.pulled };
  const framed = {
    headers: new Headers(headers),
    body: stream,
    arrayBuffer(): Promise<ArrayBuffer> {
      record.wholeReads++;
      if (delivered === undefined) return new Promise(() => {});
      return Promise.resolve(encoder.encode(delivered).buffer as ArrayBuffer);
    },
    text(): Promise<string> {
      record.textReads++;
      if (delivered === undefined) return new Promise(() => {});
      return Promise.resolve(delivered);
    },
  };
  markServerFramedBody(framed, () => record.abandoned++);
  return { framed, record };
}

test('a server-framed body declared within the limit is read whole, not through its stream', async () => {
  const asBytes = framedMessage({ 'Content-Length': '5' }, 'hello');
  const bytes = await readBoundedBytes(asBytes.framed, 6, { timeoutMs: 10_000 });
  assert.equal(new TextDecoder().decode(bytes), 'hello');
  assert.deepEqual([asBytes.record.wholeReads, asBytes.record.textReads], [1, 0]);
  assert.equal(asBytes.record.streamRead(), 0);
  // As text, the runtime decodes it as it reads.
  const asText = framedMessage({ 'Content-Length': '5' }, 'hello');
  assert.equal(await readBoundedText(asText.framed, 6, { timeoutMs: 10_000 }), 'hello');
  assert.deepEqual([asText.record.wholeReads, asText.record.textReads], [0, 1]);
  assert.equal(asText.record.streamRead(), 0);
});

test('a server-framed body that delivers more than the limit is refused all the same', async () => {
  const { framed } = framedMessage({ 'Content-Length': '5' }, 'far more than five bytes');
  assert.equal(await readBoundedBytes(framed, 6), undefined);
  const text = framedMessage({ 'Content-Length': '5' }, 'far more than five bytes');
  assert.equal(await readBoundedText(text.framed, 6), undefined);
  assert.equal(text.record.textReads, 1);
});

test('a server-framed body that stalls times out, and its connection is abandoned', async () => {
  const { framed, record } = framedMessage({ 'Content-Length': '5' }, undefined);
  await assert.rejects(readBoundedBytes(framed, 6, { timeoutMs: 50 }), BodyReadTimeout);
  assert.equal(record.abandoned, 1);
  const text = framedMessage({ 'Content-Length': '5' }, undefined);
  await assert.rejects(readBoundedText(text.framed, 6, { timeoutMs: 50 }), BodyReadTimeout);
  assert.equal(text.record.abandoned, 1);
});

test('a server-framed body declared past the limit is refused unread, as bytes or as text', async () => {
  for (const read of [readBoundedBytes, readBoundedText]) {
    const { framed, record } = framedMessage({ 'Content-Length': '7' }, 'seven b');
    assert.equal(await read(framed, 6), undefined);
    assert.deepEqual([record.wholeReads, record.textReads, record.streamRead()], [0, 0, 0]);
  }
});

test('a server-framed body without a length, or with a transfer coding, is read counting chunks', async () => {
  const headerSets: Record<string, string>[] = [
    {},
    { 'Content-Length': '5', 'Transfer-Encoding': 'chunked' },
  ];
  for (const headers of headerSets) {
    const { framed, record } = framedMessage(headers, 'hello', ['aaaa', 'bbbb', 'cccc']);
    assert.equal(await readBoundedBytes(framed, 6), undefined);
    assert.equal(record.wholeReads, 0);
    assert.ok(record.streamRead() <= 8, `pulled ${record.streamRead()}`);
  }
});

test('an unmarked request is read counting chunks, whatever its Content-Length says', async () => {
  const { stream, seen } = chunkedBody(['aaaa', 'bbbb', 'cccc', 'dddd']);
  const lying = { ...message(stream, { 'Content-Length': '2' }), arrayBuffer: () => assert.fail() };
  assert.equal(await readBoundedBytes(lying, 6), undefined);
  assert.ok(seen.pulled <= 8, `pulled ${seen.pulled}`);
});
