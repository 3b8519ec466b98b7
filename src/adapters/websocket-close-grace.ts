/**
 * How a serving helper's `close()` ends its WebSockets: each gets the `1001` close frame after
 * what was already queued to it, and the helper waits a bounded time for them to finish before
 * it drops what is left. Dropping at once would lose the queued messages and the close frame
 * (the peer would see `1006`); waiting without a bound would let a peer that never answers the
 * close hold `close()` open.
 *
 * @module
 */

/**
 * How long `close()` waits, in milliseconds, for its WebSockets to deliver what was queued to
 * them and finish the closing handshake before it drops the connections still open: time for
 * tens of megabytes to reach a peer that reads, and no longer than a stopping process can wait.
 */
export const WEBSOCKET_CLOSE_GRACE_MS = 1_000;

/** The close frame of a server going away (RFC 6455 §7.4.1). */
export const SERVER_CLOSING = Object.freeze({ code: 1001, reason: 'server closing' });

/**
 * Resolves once every one of `endings` has settled or `graceMs` has passed, whichever is first.
 * Its timer is cleared before it resolves, so it never keeps a process alive afterwards.
 */
export async function settledWithin(
  endings: readonly Promise<unknown>[],
  graceMs: number = WEBSOCKET_CLOSE_GRACE_MS,
): Promise<void> {
  if (endings.length === 0) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
  try {
    await Promise.race([Promise.allSettled(endings), graceOver]);
  } finally {
    clearTimeout(timer);
  }
}
