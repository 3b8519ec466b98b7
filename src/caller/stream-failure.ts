/**
 * A streamed result whose failure says why it failed.
 *
 * Cap'n Web delivers a streaming method's result as a `ReadableStream` fed by the peer. When the
 * session ends under it (the socket dropped, the peer went away, the caller disposed the
 * session), Cap'n Web errors that stream with a plain `Error` of its own ("WritableStream RPC
 * stub was disposed without calling close()"), while every call on the same session fails with
 * the typed error of what happened (`rpc_connection_lost`, retryable; `session_disposed`). A
 * caller deciding whether to retry must see the same error from the stream.
 *
 * Mapping the failure per read (a second stream in front, or a reader whose `read()` catches)
 * costs one more promise per item, which took a sixth to a quarter of the streamed-item rate on
 * Deno (a second stream: as much on Node too). Instead the error object itself is made the typed
 * one, once, when the stream fails: a stream errors its reader's `closed` promise before it
 * rejects the reads waiting on it (the Streams standard, ReadableStreamError), so a reaction on
 * `closed` runs before any reader sees the error, and the reads reject with the same object.
 * workerd rejects the waiting reads first; there the reader's `read()` attaches the same reaction
 * to each read it returns, ahead of the caller's own (which order holds is learnt once, at load).
 * The stream is given a subclass of `ReadableStream` whose `getReader()` does this and whose
 * async iterator and `pipeTo` read through it; it is still the same stream with its own state.
 * `tee()` and `pipeThrough()`, which read with the platform's internal reader, pass the error on
 * as Cap'n Web raised it.
 *
 * @module
 */

/** How each stream given the subclass maps a failure; kept off the stream object itself. */
const failureMappers = new WeakMap<object, (error: unknown) => unknown>();

/**
 * The message of the error Cap'n Web (0.12) fails a received stream with when its session ends
 * under it. Only that error is ever made the typed one: a failure the peer sent, or one of the
 * caller's own, is what happened and is left as it is.
 */
const SESSION_ENDED_STREAM_MESSAGE = 'WritableStream RPC stub was disposed without calling close()';

/** The members a typed error carries that Cap'n Web's plain one is given. */
const TYPED_ERROR_MEMBERS = ['name', 'message', 'code', 'status', 'retryable', 'reason'] as const;

/** Whether `error` is Cap'n Web's own plain error for a stream whose session ended. */
function isSessionEndedStreamError(error: unknown): error is Error {
  return error !== null && typeof error === 'object' &&
    Object.getPrototypeOf(error) === Error.prototype &&
    (error as Error).message === SESSION_ENDED_STREAM_MESSAGE && !('code' in error);
}

/**
 * Makes `error`, when it is Cap'n Web's plain error for a stream whose session ended, the
 * `typed` error of that end: its class and its members. Anything else (an error the peer sent,
 * the caller's own, the `TypeError` a released reader's `closed` rejects with) is left as it is.
 */
function adoptTypedFailure(error: unknown, typed: unknown): void {
  if (typed === error || typed === null || typeof typed !== 'object') return;
  if (!isSessionEndedStreamError(error)) return;
  Object.setPrototypeOf(error, Object.getPrototypeOf(typed));
  for (const member of TYPED_ERROR_MEMBERS) {
    if (!(member in typed)) continue;
    Object.defineProperty(error, member, {
      value: (typed as Record<string, unknown>)[member],
      writable: true,
      configurable: true,
      enumerable: member !== 'name' && member !== 'message',
    });
  }
}

/**
 * Whether this runtime rejects a reader's `closed` promise before the reads waiting on a stream
 * that fails, as the Streams standard orders it. Until the check at load has answered, and
 * where it answers no, each read carries the reaction itself.
 */
let closedRejectsBeforeReads = false;

function learnRejectionOrder(): void {
  let controller: ReadableStreamDefaultController<never> | undefined;
  const reader = new ReadableStream<never>({
    start(started) {
      controller = started;
    },
  }).getReader();
  let settled = false;
  reader.closed.then(undefined, () => {
    if (!settled) closedRejectsBeforeReads = true;
    settled = true;
  });
  reader.read().then(undefined, () => {
    settled = true;
  });
  controller?.error(new Error('rejection order'));
}
learnRejectionOrder();

/**
 * `reader`, with each read carrying the reaction that makes a plain failure the typed one,
 * attached before the caller's own; the caller still awaits the reader's own promise.
 */
function readerAdoptingOnEachRead<T>(
  reader: ReadableStreamDefaultReader<T>,
  failureOf: (error: unknown) => unknown,
): ReadableStreamDefaultReader<T> {
  const adopt = (error: unknown) => adoptTypedFailure(error, failureOf(error));
  return {
    read() {
      const reading = reader.read();
      reading.then(undefined, adopt);
      return reading;
    },
    releaseLock: () => reader.releaseLock(),
    cancel: (reason?: unknown) => reader.cancel(reason),
    get closed() {
      return reader.closed;
    },
  };
}

/** The subclass a streamed result is given; never constructed. */
class TypedFailureReadableStream<T> extends ReadableStream<T> {
  /** A reader whose reads fail with the session's typed error when the stream fails under it. */
  override getReader(): ReadableStreamDefaultReader<T>;
  override getReader(options: { mode: 'byob' }): ReadableStreamBYOBReader;
  override getReader(options?: { mode?: 'byob' }): ReadableStreamReader<T> {
    const reader = options?.mode === 'byob' ? super.getReader({ mode: 'byob' }) : super.getReader();
    const failureOf = failureMappers.get(this);
    if (failureOf === undefined) return reader;
    reader.closed.then(undefined, (error: unknown) => adoptTypedFailure(error, failureOf(error)));
    if (closedRejectsBeforeReads || options?.mode === 'byob') return reader;
    return readerAdoptingOnEachRead(reader as ReadableStreamDefaultReader<T>, failureOf);
  }

  /** Iterates the items through {@link getReader}, as the standard iterator does. */
  override async *values(
    options?: { preventCancel?: boolean },
  ): ReadableStreamAsyncIterator<T> {
    const reader = this.getReader();
    let finished = false;
    try {
      for (;;) {
        const result = await reader.read();
        if (result.done) {
          finished = true;
          return undefined;
        }
        yield result.value;
      }
    } finally {
      // Left early (a `break`, a failure): the standard iterator cancels unless told not to.
      if (!finished && options?.preventCancel !== true) await reader.cancel().catch(() => {});
      reader.releaseLock();
    }
  }

  /** `for await` over the items, as {@link values}. */
  override [Symbol.asyncIterator](
    options?: { preventCancel?: boolean },
  ): ReadableStreamAsyncIterator<T> {
    return this.values(options);
  }

  /** Pipes as the standard does; the returned promise rejects with the typed failure. */
  override pipeTo(destination: WritableStream<T>, options?: StreamPipeOptions): Promise<void> {
    const failureOf = failureMappers.get(this) ?? ((error: unknown) => error);
    return super.pipeTo(destination, options).then(undefined, (error: unknown) => {
      const typed = failureOf(error);
      adoptTypedFailure(error, typed);
      throw error;
    });
  }
}

/**
 * Gives `source` readers, an async iterator and a `pipeTo` that fail with the typed error
 * `failureOf(error)` names (the session's own reason, when it has one) instead of the plain
 * error `source` failed with, and returns it. Items, backpressure and cancellation are the
 * stream's own; nothing is added per item.
 */
export function streamWithTypedFailure<T>(
  source: ReadableStream<T>,
  failureOf: (error: unknown) => unknown,
): ReadableStream<T> {
  failureMappers.set(source, failureOf);
  Object.setPrototypeOf(source, TypedFailureReadableStream.prototype);
  return source;
}
