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
