// A streamed result that fails with its session's typed reason: the same stream and its items in
// order; a plain failure met through a reader, its `closed` promise, `for await` or `pipeTo`
// arrives as the typed error `failureOf` names; any other failure is left as it is; cancellation
// works as the standard iterator's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo, SvcInternalError } from '../../src/core/errors.ts';
import { streamWithTypedFailure } from '../../src/caller/stream-failure.ts';

/** Cap'n Web's error for a stream whose session ended: a plain `Error`. */
const untyped = () => new Error('WritableStream RPC stub was disposed without calling close()');
const LOST = () =>
  new SvcInternalError('Peer closed WebSocket: 1006', {
    status: 503,
    reason: 'rpc_connection_lost',
  });

/** A source of `items` that then fails with `failWith` (or ends); it records a cancel. */
function source(items: number[], failWith?: unknown) {
  const seen = { cancelled: [] as unknown[] };
  let next = 0;
  const stream = new ReadableStream<number>({
    pull(controller) {
      if (next < items.length) controller.enqueue(items[next++]);
      else if (failWith !== undefined) controller.error(failWith);
      else controller.close();
    },
    cancel(reason) {
      seen.cancelled.push(reason);
    },
  }, { highWaterMark: 0 });
  return { stream, seen };
}

function typed(stream: ReadableStream<number>, seenErrors: unknown[] = []) {
  return streamWithTypedFailure(stream, (error) => {
    seenErrors.push(error);
    return LOST();
  });
}

/** The typed failure the session would give. */
function assertLost(error: unknown): true {
  assert.ok(error instanceof SvcInternalError, String(error));
  assert.deepEqual({ ...svcErrorInfo(error) }, {
    code: 'internal',
    status: 503,
    retryable: true,
    reason: 'rpc_connection_lost',
  });
  assert.equal((error as Error).message, 'Peer closed WebSocket: 1006');
  return true;
}

test('the same stream, still a ReadableStream, with its items in order', async () => {
  const { stream } = source([1, 2, 3]);
  const result = typed(stream);
  assert.equal(result, stream);
  assert.ok(result instanceof ReadableStream);
  const items: number[] = [];
  for await (const item of result) items.push(item);
  assert.deepEqual(items, [1, 2, 3]);
  const reader = typed(source([4]).stream).getReader();
  assert.deepEqual(await reader.read(), { done: false, value: 4 });
  assert.deepEqual(await reader.read(), { done: true, value: undefined });
});

test('a read waiting when the stream fails, a later read and closed all get the typed error', async () => {
  const seenErrors: unknown[] = [];
  const failure = untyped();
  let fail: (error: unknown) => void = () => {};
  const stream = new ReadableStream<number>({
    start(controller) {
      controller.enqueue(7);
      fail = (error) => controller.error(error);
    },
  });
  const reader = typed(stream, seenErrors).getReader();
  assert.deepEqual(await reader.read(), { done: false, value: 7 });
  const waiting = reader.read();
  fail(failure);
  await assert.rejects(waiting, assertLost);
  await assert.rejects(reader.read(), assertLost);
  await assert.rejects(reader.closed, assertLost);
  // The plain error itself became the typed one: nothing else was ever handed out.
  assert.ok(seenErrors.length > 0 && seenErrors.every((error) => error === failure));
});

test('a failure met by for await is typed, after the items before it', async () => {
  const items: number[] = [];
  await assert.rejects(
    (async () => {
      for await (const item of typed(source([1, 2], untyped()).stream)) items.push(item);
    })(),
    assertLost,
  );
  assert.deepEqual(items, [1, 2]);
});

test("pipeTo rejects with the typed failure, and leaves the destination's own error", async () => {
  const written: number[] = [];
  const sink = new WritableStream<number>({ write: (item) => void written.push(item) });
  await assert.rejects(typed(source([5], untyped()).stream).pipeTo(sink), assertLost);
  assert.deepEqual(written, [5]);
  const full = new Error('disk full');
  const failingSink = new WritableStream<number>({
    write: () => {
      throw full;
    },
  });
  await assert.rejects(
    typed(source([1, 2]).stream).pipeTo(failingSink),
    (error: unknown) => error === full && Object.getPrototypeOf(full) === Error.prototype,
  );
});

test("a peer's own error, or a released reader's, is left as it is", async () => {
  const peers = new TypeError('the peer failed the stream');
  const reader = typed(source([], peers).stream).getReader();
  await assert.rejects(reader.read(), (error: unknown) => error === peers && !('code' in peers));
  // A peer's taxonomy error arrives as a plain Error with its fields; another plain Error (the
  // caller's own, say) carries none. Neither is the session ending, whatever the session did.
  const refusal = Object.assign(new Error('out of stock'), {
    code: 'handler',
    status: 409,
    retryable: false,
    reason: 'out_of_stock',
  });
  const plain = new Error('something else went wrong');
  for (const failure of [refusal, plain]) {
    const failed = typed(source([], failure).stream).getReader();
    await assert.rejects(failed.read(), (error: unknown) => error === failure);
    await assert.rejects(failed.closed, (error: unknown) => error === failure);
    assert.equal(Object.getPrototypeOf(failure), Error.prototype);
  }
  assert.deepEqual({ ...svcErrorInfo(refusal) }, {
    code: 'handler',
    status: 409,
    retryable: false,
    reason: 'out_of_stock',
  });
  const released = typed(source([1]).stream).getReader();
  const closed = released.closed.then(() => undefined, (error: unknown) => error);
  released.releaseLock();
  const releaseError = await closed;
  assert.ok(releaseError instanceof TypeError);
  assert.equal('reason' in (releaseError as object), false);
});

test('leaving for await early cancels the source, unless values() is told not to', async () => {
  const cancelled = source([1, 2, 3]);
  for await (const item of typed(cancelled.stream)) if (item === 1) break;
  assert.equal(cancelled.seen.cancelled.length, 1);
  const kept = source([1, 2, 3]);
  const stream = typed(kept.stream);
  for await (const item of stream.values({ preventCancel: true })) if (item === 1) break;
  assert.deepEqual(kept.seen.cancelled, []);
  assert.equal(stream.locked, false, 'the lock is released either way');
  assert.deepEqual(await stream.getReader().read(), { done: false, value: 2 });
});
