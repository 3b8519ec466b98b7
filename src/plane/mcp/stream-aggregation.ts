/**
 * A streaming tool's items, aggregated into `{ items }` within `mcp.streamLimits`, with one
 * progress notification per item under its own byte budget (Limits rule 1). Past the item or
 * byte cap the upstream stream is cancelled (not drained) and the call fails in-band; past only
 * the progress budget, notifications stop and the bounded result is still delivered.
 *
 * @module
 */
import { SvcInternalError } from '../../core/errors.ts';

/** Where a call's progress notifications go. */
export interface ProgressSink {
  /** The request's `progressToken`. */
  token: string | number;
  /** Sends one `notifications/progress` with these params. */
  send(
    params: { progressToken: string | number; progress: number; message: string },
  ): Promise<void>;
}

/** Limits of one aggregation. */
export interface AggregationLimits {
  maxItems: number;
  maxBytes: number;
}

const encoder = new TextEncoder();

function limitExceeded(what: string, limit: number): SvcInternalError {
  return new SvcInternalError(
    `The streamed result passed mcp.streamLimits.${what} (${limit}); the stream was cancelled`,
    { reason: what === 'maxItems' ? 'mcp_stream_item_limit' : 'mcp_stream_byte_limit' },
  );
}

/**
 * Reads `stream` to its end into an array. Throws the stream's own error, or a
 * `SvcInternalError` (`mcp_stream_item_limit` / `mcp_stream_byte_limit`) after cancelling the
 * stream; `signal` (the client went away) cancels it too.
 */
export async function aggregateStream(
  stream: ReadableStream<unknown>,
  limits: AggregationLimits,
  progress: ProgressSink | undefined,
  signal?: AbortSignal,
): Promise<unknown[]> {
  const reader = stream.getReader();
  const cancel = (reason: unknown) => {
    reader.cancel(reason).catch(() => {});
  };
  const onAbort = () => cancel(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  const items: unknown[] = [];
  let bytes = 0;
  let progressBytes = 0;
  let progressOpen = progress !== undefined;
  try {
    if (signal?.aborted) throw signal.reason;
    for (;;) {
      const next = await reader.read();
      // A cancel on abort ends a pending read as `done`: that is not the stream's end.
      if (signal?.aborted) throw signal.reason;
      if (next.done) break;
      if (items.length === limits.maxItems) throw limitExceeded('maxItems', limits.maxItems);
      const serialized = JSON.stringify(next.value) ?? 'null';
      const size = encoder.encode(serialized).byteLength;
      bytes += size;
      if (bytes > limits.maxBytes) throw limitExceeded('maxBytes', limits.maxBytes);
      items.push(next.value);
      if (progressOpen) {
        const params = {
          progressToken: progress!.token,
          progress: items.length,
          message: serialized,
        };
        // The budget counts what is sent: the whole notification, token included.
        progressBytes += encoder.encode(JSON.stringify(params)).byteLength;
        if (progressBytes > limits.maxBytes) progressOpen = false;
        else await progress!.send(params);
      }
    }
    return items;
  } catch (error) {
    cancel(error);
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    try {
      reader.releaseLock();
    } catch {
      // A runtime that refuses while a read is settling: the stream is cancelled anyway.
    }
  }
}
