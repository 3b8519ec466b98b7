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
 * Reads a body as text, counting bytes as they arrive; `undefined` (and the stream cancelled)
 * as soon as it passes `maxBytes`. A declared `Content-Length` past the limit is refused unread.
 */
export async function readBoundedText(
  message: BodyWithHeaders,
  maxBytes: number,
): Promise<string | undefined> {
  const declared = message.headers.get('content-length');
  if (declared !== null && /^[0-9]+$/.test(declared) && Number(declared) > maxBytes) {
    await message.body?.cancel().catch(() => {});
    return undefined;
  }
  if (message.body === null) return '';
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
  // One decode of the whole body: a streaming decode per chunk costs far more on some runtimes,
  // and a batch is usually a single chunk.
  if (chunks.length === 1) return utf8Decoder.decode(chunks[0]);
  const body = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return utf8Decoder.decode(body);
}
