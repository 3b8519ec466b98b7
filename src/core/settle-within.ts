/**
 * Bounds work the library waits on but does not control (a configuration function, a shared
 * cache, a peer), so that work that never settles cannot hold a request forever.
 *
 * @module
 */

/** Settles with `work`, or rejects with `onTimeout()` after `ms` (aborting `controller`). */
export function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  // A racing timeout, not only the abort signal: a peer that ignores the signal must not hold
  // the resolution past its bound.
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(onTimeout());
    }, ms);
  });
  const running = Promise.resolve().then(() => work(controller.signal));
  return Promise.race([running, timeout]).finally(() => clearTimeout(timer));
}

/**
 * {@link withDeadline} for work that usually settles at once (a process-local cache, a services
 * function returning a list): the timer is only armed when the first microtask turn did not
 * settle it, so the common case costs no timer.
 */
export async function withLazyDeadline<T>(
  work: () => T | Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let running: Promise<T>;
  try {
    running = Promise.resolve(work());
  } catch (error) {
    running = Promise.reject(error);
  }
  let settled = false;
  running.then(() => (settled = true), () => (settled = true));
  // One turn lets an already-settled result report; anything slower gets the timer.
  await null;
  if (settled) return running;
  return withDeadline(() => running, ms, onTimeout);
}
