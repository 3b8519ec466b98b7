/**
 * Turns what a streaming handler returned (an async iterable, a sync iterable or a readable
 * stream) into a plain `ReadableStream` that Cap'n Web can send.
 *
 * The stream is built with the global `ReadableStream` constructor because Cap'n Web only
 * serialises streams whose prototype is exactly `ReadableStream.prototype` (Node's
 * `TransformStream().readable`, for one, is a subclass). It pulls one item per consumer read
 * (`highWaterMark: 0`), so backpressure reaches the handler instead of buffering its output.
 *
 * @module
 */

/** A source reduced to the two operations the stream needs. */
interface ItemPuller {
  next(): Promise<IteratorResult<unknown>>;
  close(reason: unknown): Promise<void>;
}

/** How the stream treats items and failures. */
/**
 * A validated item: `{ now }` when validation answered at once, `{ later }` when it had to wait.
 * Tagged rather than told apart by a `then`: reading an item's `then` runs the handler's code,
 * which only the validator's guard may do.
 */
export type ValidatedItem = { readonly now: unknown } | { readonly later: Promise<unknown> };

export interface ItemStreamOptions {
  /** The value to emit for an item, or throws the error the stream should end with. */
  validateItem(item: unknown): ValidatedItem;
  /** Maps a failure of the source (a throw mid-stream) to the error the consumer sees. */
  sourceFailure(error: unknown): unknown;
  /** Called once when the consumer cancels the stream. */
  onCancel?(reason: unknown): void;
}

function isObjectLike(value: unknown): value is object {
  return value !== null && (typeof value === 'object' || typeof value === 'function');
}

function readerPuller(stream: ReadableStream<unknown>): ItemPuller {
  const reader = stream.getReader();
  return {
    next: () => reader.read() as Promise<IteratorResult<unknown>>,
    close: (reason) => reader.cancel(reason),
  };
}

function asyncIteratorPuller(iterator: AsyncIterator<unknown>): ItemPuller {
  return {
    next: () => iterator.next(),
    close: async (reason) => {
      await iterator.return?.(reason);
    },
  };
}

function syncIteratorPuller(iterator: Iterator<unknown>): ItemPuller {
  return {
    // An item of a sync iterable may be a promise; `for await` semantics await it.
    next: async () => {
      const result = iterator.next();
      return result.done ? result : { done: false, value: await result.value };
    },
    close: async (reason) => {
      iterator.return?.(reason);
    },
  };
}

function pullerFor(source: unknown): ItemPuller {
  if (isObjectLike(source)) {
    if (typeof (source as ReadableStream).getReader === 'function') {
      return readerPuller(source as ReadableStream<unknown>);
    }
    const asyncIterator = (source as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator];
    if (typeof asyncIterator === 'function') return asyncIteratorPuller(asyncIterator.call(source));
    const iterator = (source as Partial<Iterable<unknown>>)[Symbol.iterator];
    if (typeof iterator === 'function') return syncIteratorPuller(iterator.call(source));
  }
  // A string is iterable too, but streaming its characters is never what a handler meant.
  throw new TypeError(
    'a streaming handler must return an async iterable, a sync iterable or a ReadableStream',
  );
}

async function closeQuietly(puller: ItemPuller, reason: unknown): Promise<void> {
  try {
    await puller.close(reason);
  } catch {
    // The stream is already ending with its own error; a failing cleanup must not replace it.
  }
}

/**
 * Wraps a handler's stream source in a pull-based global `ReadableStream`. Each item passes
 * through `validateItem`; a rejected item ends the stream with that error and closes the
 * source; a throw from the source ends it with `sourceFailure(error)`; a cancel from the
 * consumer reaches the source's `return()` / `cancel()`. Throws `TypeError` synchronously when
 * `source` is not a stream source.
 */
export function itemStream(source: unknown, options: ItemStreamOptions): ReadableStream<unknown> {
  const puller = pullerFor(source);
  let finished = false;
  return new ReadableStream<unknown>(
    {
      async pull(controller) {
        let done: boolean;
        let value: unknown;
        try {
          // Read inside the try: a step whose fields throw (or no step object at all) is the
          // source failing, not an error of ours.
          const result: unknown = await puller.next();
          if (result === null || typeof result !== 'object') {
            throw new TypeError('The stream source returned an iterator result that is no object');
          }
          done = Boolean((result as IteratorResult<unknown>).done);
          value = done ? undefined : (result as IteratorResult<unknown>).value;
        } catch (error) {
          // A source failing after the consumer cancelled reaches no one.
          if (finished) return;
          finished = true;
          controller.error(options.sourceFailure(error));
          return;
        }
        if (finished) return;
        if (done) {
          finished = true;
          controller.close();
          return;
        }
        let item: unknown;
        try {
          // An item validated at once is emitted without waiting a turn for it.
          const validated = options.validateItem(value);
          item = 'now' in validated ? validated.now : await validated.later;
        } catch (error) {
          if (finished) return;
          finished = true;
          controller.error(error);
          await closeQuietly(puller, error);
          return;
        }
        if (!finished) controller.enqueue(item);
      },
      async cancel(reason) {
        if (finished) return;
        finished = true;
        options.onCancel?.(reason);
        await closeQuietly(puller, reason);
      },
    },
    { highWaterMark: 0 },
  );
}
