/**
 * Moving the wall clock (`Date.now`) forward without waiting, for tests of what happens once
 * time has passed (token expiry, proof age, stalled requests). Timers are not affected.
 */
export interface SteppedWallClock {
  /** Moves `Date.now` forward by `ms`. */
  advance(ms: number): void;
  /** Puts the real `Date.now` back; call it in `finally`. */
  restore(): void;
}

/** Replaces `Date.now` with one that can be moved forward; restore it when done. */
export function steppableWallClock(): SteppedWallClock {
  const realNow = Date.now;
  let offset = 0;
  Date.now = () => realNow.call(Date) + offset;
  return {
    advance(ms) {
      offset += ms;
    },
    restore() {
      Date.now = realNow;
    },
  };
}

/**
 * Runs `body` with `Date.now` (the wall clock) and `performance.now` (the monotonic clock)
 * replaced by clocks it moves through `moved`, as an NTP step and real elapsed time would. The
 * replacements are in place before `body` builds anything, so a clock captured at construction
 * is one of them too.
 */
export async function withMovableClocks(
  body: (moved: { wallMs: number; monotonicMs: number }) => Promise<void>,
): Promise<void> {
  const realDateNow = Date.now;
  const clock = globalThis.performance;
  const realMonotonicNow = clock.now.bind(clock);
  const ownNow = Object.getOwnPropertyDescriptor(clock, 'now');
  const moved = { wallMs: 0, monotonicMs: 0 };
  Date.now = () => realDateNow() + moved.wallMs;
  Object.defineProperty(clock, 'now', {
    value: () => realMonotonicNow() + moved.monotonicMs,
    configurable: true,
    writable: true,
  });
  try {
    await body(moved);
  } finally {
    Date.now = realDateNow;
    if (ownNow === undefined) delete (clock as { now?: unknown }).now;
    else Object.defineProperty(clock, 'now', ownNow);
  }
}

/** The delays of the timers that have fired since {@link recordFiredTimers}, in firing order. */
export interface FiredTimers {
  /** The requested delay (ms) of each timer whose callback has run. */
  readonly delays: readonly number[];
  /** Puts the real `setTimeout` back; call it in `finally`. */
  restore(): void;
}

/**
 * Records which timers fire, by their requested delay, so a test can tell which deadline ended
 * a wait without timing it: timers fire in the order of their deadlines however late a busy
 * machine runs them, while a measured wait can stretch past a longer deadline.
 */
export function recordFiredTimers(): FiredTimers {
  const realSetTimeout = globalThis.setTimeout;
  const delays: number[] = [];
  globalThis.setTimeout =
    ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      realSetTimeout(() => {
        delays.push(ms ?? 0);
        callback(...args);
      }, ms)) as typeof setTimeout;
  return {
    delays,
    restore() {
      globalThis.setTimeout = realSetTimeout;
    },
  };
}
