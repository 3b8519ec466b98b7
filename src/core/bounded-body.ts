/**
 * Reading a request or response body with a byte limit, so a lying or endless sender costs at
 * most the limit in memory.
 *
 * @module
 */

/** What a bounded read looks at: a `Request` or a `Response`. */
export interface BodyWithHeaders {
  readonly headers: Headers;
  readonly body: ReadableStream<Uint8Array> | null;
}

const utf8Decoder = new TextDecoder();

/**
 * Reads a body, counting bytes as they arrive; `undefined` (and the stream cancelled) as soon as
 * it passes `maxBytes`. A declared `Content-Length` past the limit is refused unread.
 */
export async function readBoundedBytes(
  message: BodyWithHeaders,
  maxBytes: number,
): Promise<Uint8Array | undefined> {
  const declared = message.headers.get('content-length');
  if (declared !== null && /^[0-9]+$/.test(declared) && Number(declared) > maxBytes) {
    await message.body?.cancel().catch(() => {});
    return undefined;
  }
  if (message.body === null) return new Uint8Array(0);
  const reader = message.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > maxBytes) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  // Decoded whole by the caller: a streaming decode per chunk costs far more on some runtimes,
  // and a body is usually a single chunk.
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/**
 * Reads a body as text (invalid UTF-8 becomes U+FFFD) with the limits of
 * {@link readBoundedBytes}; `undefined` past `maxBytes`.
 */
export async function readBoundedText(
  message: BodyWithHeaders,
  maxBytes: number,
): Promise<string | undefined> {
  const bytes = await readBoundedBytes(message, maxBytes);
  return bytes === undefined ? undefined : utf8Decoder.decode(bytes);
}
