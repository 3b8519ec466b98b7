/**
 * Idempotency keys: opaque caller-chosen strings that ride the transport (never the payload) so
 * a handler can deduplicate retries in its own store. The system forwards a key and nothing else;
 * it never deduplicates or retries by itself.
 *
 * @module
 */

/** Header that carries the key over HTTP-batch and service-binding transports. */
export const SVC_IDEMPOTENCY_KEY_HEADER = 'X-Svc-Idempotency-Key';

/** Query parameter that carries the key on a WebSocket upgrade URL. */
export const SVC_IDEMPOTENCY_KEY_QUERY_PARAM = 'idempotency_key';

/** Longest key that is kept. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

// ASCII word characters, `-` and `=`: safe in headers, URLs, log lines and store keys
// (`<key>:<methodName>` stays unambiguous because `:` cannot occur in a key).
const IDEMPOTENCY_KEY = /^[A-Za-z0-9_\-=]{1,255}$/;

/**
 * Keeps a received or forwarded key only when it is a string of 1 to 255 characters drawn from
 * `[A-Za-z0-9_-=]`. Anything else (empty, longer, non-ASCII, punctuation, whitespace, CR/LF, a
 * non-string) is dropped: `undefined`, never an error, so a bad key never fails the call.
 */
export function filterIdempotencyKey(raw: unknown): string | undefined {
  return typeof raw === 'string' && IDEMPOTENCY_KEY.test(raw) ? raw : undefined;
}
