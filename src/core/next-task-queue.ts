/**
 * Work that should run soon, but not before what the current task is doing (a response on its
 * way): queued, and run together on the next macrotask.
 *
 * The queue is bounded. A caller that awaits one answer after another without ever yielding to
 * the event loop (nothing but resolved promises in between) never lets a macrotask run; without a
 * bound, the queued work and everything it holds would grow with every request. Once
 * {@link MAX_QUEUED_WORK} items wait, they run at once.
 *
 * @module
 */
import { nextMacrotask } from './next-macrotask.ts';
import { timersOutliveRequests } from './shared-timeout.ts';

/** Most work items held for the next macrotask before the queue runs at once. */
export const MAX_QUEUED_WORK = 64;

let queued: (() => void)[] = [];
let scheduled = false;

function runQueued(): void {
  const work = queued;
  queued = [];
  for (const item of work) {
    try {
      item();
    } catch {
      // One failing item must not keep the others from running; each reports its own failures.
    }
  }
}

/**
 * Runs `work` on the next macrotask, with everything else queued until then; at once, with
 * everything queued, when the queue is full, and at once where the runtime's tasks belong to the
 * request that scheduled them (Workers: another request's work must not wait for them).
 */
export function runOnNextTask(work: () => void): void {
  // Where a task may belong to another request (Workers), the work runs now instead.
  if (!timersOutliveRequests()) {
    work();
    return;
  }
  queued.push(work);
  if (queued.length >= MAX_QUEUED_WORK) {
    runQueued();
    return;
  }
  if (scheduled) return;
  scheduled = true;
  void nextMacrotask().then(() => {
    scheduled = false;
    runQueued();
  });
}
