/**
 * Request ids: every request entering the control plane gets one (the incoming value when it is
 * acceptable, else a fresh UUID), services adopt a propagated id and echo it on responses.
 *
 * @module
 */

/** Header that carries the request id over HTTP-batch and service-binding transports. */
export const SVC_REQUEST_ID_HEADER = 'X-Request-Id';

/** Query parameter that carries the request id on a WebSocket upgrade URL. */
export const SVC_REQUEST_ID_QUERY_PARAM = 'request_id';

/** Longest request id that is adopted. */
export const MAX_REQUEST_ID_LENGTH = 200;

// Visible ASCII only: an adopted id is echoed in a response header and written to logs, so it
// must not carry CR/LF (header injection), spaces or control characters.
const ACCEPTABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * Adopts an incoming request id when it is 1 to 200 visible ASCII characters; otherwise
 * returns `undefined` and the caller generates one with {@link generateRequestId}.
 */
export function acceptRequestId(raw: unknown): string | undefined {
  return typeof raw === 'string' && ACCEPTABLE_REQUEST_ID.test(raw) ? raw : undefined;
}

/** A fresh request id (a random UUID). */
export function generateRequestId(): string {
  return crypto.randomUUID();
}
