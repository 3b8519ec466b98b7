/**
 * Reading a request or response body with a byte limit (and, where the sender is a stranger, a
 * time limit), so a lying, endless or stalled sender costs at most the limit in memory and the
 * timeout in time.
 *
 * @module
 */

import { startSharedTimeout } from './shared-timeout.ts';
import { untouchedWholeText } from './whole-text-body.ts';

/** What a bounded read looks at: a `Request` or a `Response`. */
export interface BodyWithHeaders {
  readonly headers: Headers;
  readonly body: ReadableStream<Uint8Array> | null;
  readonly bodyUsed?: boolean;
}

/** Thrown by {@link readBoundedBytes} when the body did not arrive within its `timeoutMs`. */
export class BodyReadTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`The body did not arrive within ${timeoutMs} ms`);
    this.name = 'BodyReadTimeout';
  }
}

/**
 * Headers of an answer to a request whose body was given up on (it stalled, or could not be
 * read to its end): the rest of that body will never be read, so its connection cannot carry
 * another request. A server whose read cannot end the connection itself (Bun's) closes it after
 * this answer instead of waiting for bytes that may never come.
 */
export const BODY_ABANDONED_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  Connection: 'close',
});

/** Limits of a bounded read beyond its byte limit. */
export interface BoundedReadOptions {
  /** Gives up (cancelling the stream, throwing {@link BodyReadTimeout}) after this long. */
  readonly timeoutMs?: number;
}

const utf8Decoder = new TextDecoder();

/** A body a server's HTTP parser frames, read whole as bytes or as text. */
interface FramedBody {
  arrayBuffer(): Promise<ArrayBuffer>;
  text(): Promise<string>;
}

// A private symbol, so no one else can mark a body. A property rather than a weak map entry:
// an entry per request keeps the request alive through the garbage collector's young-generation
// passes, which costs more than reading the body.
const SERVER_FRAMED = Symbol('svcplane.serverFramedBody');

function abandonOfServerFramed(message: object): (() => void) | undefined {
  return (message as { [SERVER_FRAMED]?: () => void })[SERVER_FRAMED];
}

/**
 * Marks `message` as a body the runtime's HTTP parser frames: it never delivers more body bytes
 * than a declared `Content-Length` (a request a serving helper received, a response the global
 * `fetch` received). Such a body, declared within a read's limit and not content-encoded (a
 * decoded body can be far longer than its declared length), is read whole through the runtime's
 * own fast path rather than chunk by chunk through its stream (on Node, building that stream
 * costs several times the read itself). `abandon` ends the connection's body when the read times
 * out, as cancelling its stream would. A `Request` or `Response` built in process (whose stream
 * may be longer than its header says) is never marked, and is read counting every chunk.
 */
export function markServerFramedBody(message: FramedBody, abandon: () => void): void {
  try {
    // Assigned rather than defined, as cheaper per request (see whole-text-body.ts).
    (message as { [SERVER_FRAMED]?: () => void })[SERVER_FRAMED] = abandon;
  } catch {
    // An object that takes no property (frozen by its runtime) is read counting every chunk.
  }
}

/** The length `Content-Length` declares, when it holds one (digits only). */
function declaredLength(message: BodyWithHeaders): number | undefined {
  const declared = message.headers.get('content-length');
  return declared !== null && /^[0-9]+$/.test(declared) ? Number(declared) : undefined;
}

/**
 * Whether the declared length frames the body as it will be read: no transfer coding frames it
 * instead, and no content coding makes the decoded body longer.
 */
function framedByDeclaredLength(message: BodyWithHeaders): boolean {
  if (message.headers.has('transfer-encoding')) return false;
  const coding = message.headers.get('content-encoding');
  return coding === null || coding.trim().toLowerCase() === 'identity';
}

/**
 * How a bounded read of `message` goes: refused unread (its declared length is past the limit),
 * read whole through the runtime (a server-framed body within the limit: the function that
 * abandons it), or read through its stream counting bytes.
 */
function readPlan(message: BodyWithHeaders, maxBytes: number): 'refuse' | 'stream' | (() => void) {
  const declared = declaredLength(message);
  if (declared === undefined) return 'stream';
  if (declared > maxBytes) return 'refuse';
  const abandon = abandonOfServerFramed(message);
  return abandon !== undefined && framedByDeclaredLength(message) ? abandon : 'stream';
}

/** Waits for a server-framed body's whole read; past `timeoutMs`, abandons it and throws. */
async function readFramed<T>(
  read: Promise<T>,
  abandon: () => void,
  timeoutMs: number | undefined,
): Promise<T> {
  if (timeoutMs === undefined) return await read;
  let stopTimeout!: () => void;
  const timedOut = new Promise<never>((_, reject) => {
    stopTimeout = startSharedTimeout(timeoutMs, () => reject(new BodyReadTimeout(timeoutMs)));
  });
  try {
    return await Promise.race([read, timedOut]);
  } catch (error) {
    if (error instanceof BodyReadTimeout) {
      read.catch(() => {});
      abandon();
    }
    throw error;
  } finally {
    stopTimeout();
  }
}

function cancelQuietly(stream: { cancel(): Promise<void> }): void {
  try {
    stream.cancel().catch(() => {});
  } catch {
    // Already locked or consumed: nothing left to release.
  }
}

/** Releases a body that will not be read, without waiting and without ever throwing. */
export function discardBody(message: BodyWithHeaders): void {
  if (message.body !== null) cancelQuietly(message.body);
}

function joined(chunks: Uint8Array[], size: number): Uint8Array {
  // Decoded whole by the caller: a streaming decode per chunk costs far more on some runtimes,
  // and a body is usually a single chunk.
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/**
 * Reads a body, counting bytes as they arrive; `undefined` (and the stream cancelled) as soon as
 * it passes `maxBytes`. A declared `Content-Length` past the limit is refused unread. A stream
 * that fails (the sender went away or broke the framing) rejects with the stream's error; past
 * `options.timeoutMs` it rejects with {@link BodyReadTimeout}.
 */
export function readBoundedBytes(
  message: BodyWithHeaders,
  maxBytes: number,
  options: BoundedReadOptions = {},
): Promise<Uint8Array | undefined> {
  return readBounded(message, maxBytes, options, wholeBytes, (bytes) => bytes);
}

// The parser frames by the declared length; a body longer than the limit anyway is refused.
function wholeBytes(framed: FramedBody, maxBytes: number): Promise<Uint8Array | undefined> {
  return framed.arrayBuffer().then((buffer) =>
    buffer.byteLength > maxBytes ? undefined : new Uint8Array(buffer)
  );
}

// Decoded by the runtime as it reads, which spares a copy of the bytes on some (Node). Each UTF-16
// unit of the text took at least one byte, so a text longer than the limit came from a body
// longer than the limit, however the parser framed it.
function wholeText(framed: FramedBody, maxBytes: number): Promise<string | undefined> {
  return framed.text().then((text) => text.length > maxBytes ? undefined : text);
}

/**
 * A bounded read, as {@link readBoundedBytes} describes it: `whole` reads a server-framed body
 * whole, `fromStream` turns what the stream delivered into the same form.
 */
async function readBounded<T>(
  message: BodyWithHeaders,
  maxBytes: number,
  options: BoundedReadOptions,
  whole: (framed: FramedBody, maxBytes: number) => Promise<T | undefined>,
  fromStream: (bytes: Uint8Array) => T,
): Promise<T | undefined> {
  const plan = readPlan(message, maxBytes);
  if (plan === 'refuse') {
    discardBody(message);
    return undefined;
  }
  if (plan !== 'stream') {
    return await readFramed(
      whole(message as unknown as FramedBody, maxBytes),
      plan,
      options.timeoutMs,
    );
  }
  const bytes = await readStreamed(message, maxBytes, options);
  return bytes === undefined ? undefined : fromStream(bytes);
}

/** Reads a body through its stream, counting bytes as they arrive (see readBoundedBytes). */
async function readStreamed(
  message: BodyWithHeaders,
  maxBytes: number,
  options: BoundedReadOptions,
): Promise<Uint8Array | undefined> {
  if (message.body === null) return new Uint8Array(0);
  const reader = message.body.getReader();
  // Cancelling the reader ends a pending read at once (done), so the timer needs no race
  // against each read: one timer per body, no extra promise per chunk.
  let timedOut = false;
  const { timeoutMs } = options;
  const stopTimeout = timeoutMs === undefined ? undefined : startSharedTimeout(timeoutMs, () => {
    timedOut = true;
    cancelQuietly(reader);
  });
  const chunks: Uint8Array[] = [];
  let received = 0;
  try {
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (error) {
        throw timedOut ? new BodyReadTimeout(timeoutMs!) : error;
      }
      if (timedOut) throw new BodyReadTimeout(timeoutMs!);
      if (next.done) break;
      received += next.value.byteLength;
      if (received > maxBytes) {
        cancelQuietly(reader);
        return undefined;
      }
      chunks.push(next.value);
    }
  } finally {
    stopTimeout?.();
  }
  return joined(chunks, received);
}

/** Whether `text` encodes to at most `maxBytes` bytes of UTF-8, counting only when it must. */
function utf8LengthWithin(text: string, maxBytes: number): boolean {
  // Every UTF-16 code unit encodes to between one and three bytes.
  if (text.length * 3 <= maxBytes) return true;
  if (text.length > maxBytes) return false;
  return new TextEncoder().encode(text).byteLength <= maxBytes;
}

/** `text` as its UTF-8 encoding would decode: a lone surrogate becomes U+FFFD. */
function wellFormed(text: string): string {
  const checked = text as { isWellFormed?(): boolean };
  if (checked.isWellFormed?.() === true) return text;
  return utf8Decoder.decode(new TextEncoder().encode(text));
}

/**
 * Reads a body as text (invalid UTF-8 becomes U+FFFD) with the limits of
 * {@link readBoundedBytes}; `undefined` past `maxBytes`. A body this process built whole from a
 * string (an in-process batch, its answer) is that string, bounded by its encoded length,
 * without its stream.
 */
export async function readBoundedText(
  message: BodyWithHeaders,
  maxBytes: number,
  options: BoundedReadOptions = {},
): Promise<string | undefined> {
  const whole = untouchedWholeText(message);
  if (whole !== undefined) return utf8LengthWithin(whole, maxBytes) ? wellFormed(whole) : undefined;
  return await readBounded(
    message,
    maxBytes,
    options,
    wholeText,
    (bytes) => utf8Decoder.decode(bytes),
  );
}
