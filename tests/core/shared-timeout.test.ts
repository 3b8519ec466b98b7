import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startSharedTimeout } from '../../src/core/shared-timeout.ts';

/** Resolves with the monotonic time at which the timeout fired. */
function firing(delayMs: number): { fired: Promise<number>; cancel: () => void } {
  let cancel!: () => void;
  const fired = new Promise<number>((resolve) => {
    cancel = startSharedTimeout(delayMs, () => resolve(performance.now()));
  });
  return { fired, cancel };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

test('a shared timeout fires once its delay has passed, never before', async () => {
  const startedAt = performance.now();
  const { fired } = firing(30);
  const at = await fired;
  // The monotonic clock may read a fraction of a millisecond early against the timer's own.
  assert.ok(at - startedAt >= 29, `fired after ${at - startedAt} ms`);
});

test('a cancelled timeout never fires; cancelling again, or after others fired, does nothing', async () => {
  let calls = 0;
  const cancel = startSharedTimeout(10, () => calls++);
  cancel();
  cancel();
  const { fired } = firing(40);
  await fired;
  cancel();
  assert.equal(calls, 0);
});

test('a shorter timeout started after a longer one fires first, and both fire', async () => {
  const order: string[] = [];
  const long = new Promise<void>((resolve) => {
    startSharedTimeout(80, () => {
      order.push('long');
      resolve();
    });
  });
  const short = new Promise<void>((resolve) => {
    startSharedTimeout(10, () => {
      order.push('short');
      resolve();
    });
  });
  await Promise.all([long, short]);
  assert.deepEqual(order, ['short', 'long']);
});

test('timeouts ending together all fire from one timer task, each once', async () => {
  const calls = [0, 0, 0];
  const all = calls.map((_, index) =>
    new Promise<void>((resolve) => {
      startSharedTimeout(15, () => {
        calls[index]++;
        resolve();
      });
    })
  );
  await Promise.all(all);
  await sleep(30);
  assert.deepEqual(calls, [1, 1, 1]);
});

test('a callback that throws does not keep the other timeouts from firing', async () => {
  startSharedTimeout(10, () => {
    throw new Error('callback failed');
  });
  const { fired } = firing(10);
  assert.equal(typeof (await fired), 'number');
});

test('a timeout cancelled while others stay pending leaves them to fire', async () => {
  let cancelledFired = false;
  const cancelFirst = startSharedTimeout(10, () => (cancelledFired = true));
  const { fired } = firing(20);
  cancelFirst();
  assert.equal(typeof (await fired), 'number');
  assert.equal(cancelledFired, false);
});

test('a timeout started after every earlier one was cancelled still fires', async () => {
  let cancelledFired = false;
  startSharedTimeout(5, () => (cancelledFired = true))();
  await sleep(20);
  const { fired } = firing(10);
  assert.equal(typeof (await fired), 'number');
  assert.equal(cancelledFired, false);
});

test('a delay past the runtime timer range does not fire early', async () => {
  let far = 0;
  const cancelFar = startSharedTimeout(2 ** 40, () => far++);
  const { fired } = firing(20);
  await fired;
  await sleep(20);
  cancelFar();
  assert.equal(far, 0);
});

test('timeouts that ended while the thread was busy fire in deadline order, cancelled ones not at all', async () => {
  const order: string[] = [];
  const done = new Promise<void>((resolve) => {
    startSharedTimeout(30, () => {
      order.push('long');
      resolve();
    });
  });
  startSharedTimeout(10, () => {
    order.push('short');
    cancelLater();
  });
  const cancelLater = startSharedTimeout(20, () => order.push('cancelled by short'));
  // Keep the thread busy past every deadline: all three are due when the timer gets its turn.
  const busyUntil = performance.now() + 50;
  while (performance.now() < busyUntil) {
    // spin
  }
  await done;
  assert.deepEqual(order, ['short', 'long']);
});
