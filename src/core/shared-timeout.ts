/**
 * Many short-lived timeouts on one runtime timer.
 *
 * Every request a service reads a body for carries a timeout that almost never fires: the body
 * arrives, the timeout is cancelled. Arming and clearing a runtime timer per request costs more
 * than the rest of the read on some runtimes (on Deno, whose global timers are Node-compatible
 * objects, a pair cost 1.3–1.6 µs in a loop and several microseconds per served request). Here
 * the timeouts share one timer, armed for the earliest of them: starting and cancelling a timeout
 * is a set insertion and deletion, and the timer is re-armed only when a new timeout ends before
 * it or when it fires.
 *
 * While no timeout is pending the timer no longer keeps the process alive (it is unreferenced),
 * so an idle process can exit as it would without it. A runtime whose timers cannot be
 * unreferenced, or that is Workers, ties each timer to the request that set it, and may cancel it once
 * that request is over, before another request's timeout is due: there every timeout keeps a
 * timer of its own, as without this module.
 *
 * @module
 */

import { MAX_TIMER_DELAY_MS } from './deadline.ts';

/** A pending timeout: when it ends, on the monotonic clock, and what it does then. */
interface PendingTimeout {
  readonly endsAt: number;
  readonly onTimeout: () => void;
}

/** A runtime timer handle; Node, Bun and Deno return an object that can stop holding the process. */
type TimerHandle = ReturnType<typeof setTimeout> & { ref?(): unknown; unref?(): unknown };

const pending = new Set<PendingTimeout>();
let timer: TimerHandle | undefined;
let timerEndsAt = Infinity;
let timerHeld = false;

function arm(endsAt: number): void {
  if (timer !== undefined) clearTimeout(timer);
  timerEndsAt = endsAt;
  // A delay past the timer range would fire at once; the timer then re-arms for what is left.
  const delayMs = Math.min(Math.max(0, endsAt - performance.now()), MAX_TIMER_DELAY_MS);
  timer = setTimeout(fire, delayMs) as TimerHandle;
  timerHeld = true;
}

/** The timer keeps the process alive exactly while a timeout is pending. */
function hold(held: boolean): void {
  if (timer === undefined || timerHeld === held) return;
  if (held) timer.ref?.();
  else timer.unref?.();
  timerHeld = held;
}

/** Whether this runtime's timers can be shared: decided by the first one it hands out. */
let sharing: boolean | undefined;

/** A timeout on a runtime timer of its own. */
function ownTimeout(delayMs: number, onTimeout: () => void): () => void {
  const own = setTimeout(onTimeout, Math.min(Math.max(0, delayMs), MAX_TIMER_DELAY_MS));
  return () => clearTimeout(own);
}

/**
 * Whether the runtime's timers belong to the process rather than to the request that set them:
 * they can stop holding the process (Node, Bun, Deno), and the runtime is not Workers (found by
 * its `WebSocketPair` global), whose timers belong to a request even where its Node
 * compatibility makes them look like Node's. Where timers belong to a request, a callback one
 * request schedules may be cancelled with it, so no other request's work may wait for it.
 * Decided at the first call, which must come from inside a request on Workers.
 */
export function timersOutliveRequests(): boolean {
  if (sharing === undefined) {
    const workers = typeof (globalThis as { WebSocketPair?: unknown }).WebSocketPair === 'function';
    const probe = setTimeout(() => {}, MAX_TIMER_DELAY_MS) as TimerHandle;
    sharing = !workers && typeof probe.ref === 'function' && typeof probe.unref === 'function';
    clearTimeout(probe);
  }
  return sharing;
}

function fire(): void {
  timer = undefined;
  timerEndsAt = Infinity;
  const now = performance.now();
  const due: PendingTimeout[] = [];
  let next = Infinity;
  for (const entry of pending) {
    if (entry.endsAt > now) next = Math.min(next, entry.endsAt);
    else due.push(entry);
  }
  // Armed first: a timeout a callback starts is then compared with it like any other.
  if (next !== Infinity) arm(next);
  // In deadline order, even when the timer ran late and several ended meanwhile.
  due.sort((a, b) => a.endsAt - b.endsAt);
  for (const entry of due) {
    // One that an earlier callback cancelled does not run.
    if (!pending.delete(entry)) continue;
    try {
      entry.onTimeout();
    } catch {
      // One failing callback must not keep the others from ending.
    }
  }
  if (pending.size === 0) hold(false);
}

/**
 * Calls `onTimeout` once `delayMs` milliseconds have passed, unless the returned function is
 * called first (calling it later, or twice, does nothing). `delayMs` is measured on the
 * monotonic clock; `onTimeout` runs from a timer task, never synchronously.
 */
export function startSharedTimeout(delayMs: number, onTimeout: () => void): () => void {
  if (!timersOutliveRequests()) return ownTimeout(delayMs, onTimeout);
  const entry: PendingTimeout = { endsAt: performance.now() + delayMs, onTimeout };
  pending.add(entry);
  if (timer === undefined || entry.endsAt < timerEndsAt) arm(entry.endsAt);
  else hold(true);
  return () => {
    if (pending.delete(entry) && pending.size === 0) hold(false);
  };
}
