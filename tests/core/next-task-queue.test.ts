import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_QUEUED_WORK, runOnNextTask } from '../../src/core/next-task-queue.ts';
import { nextMacrotask } from '../../src/core/next-macrotask.ts';
import { timersOutliveRequests } from '../../src/core/shared-timeout.ts';

// Node, Bun and Deno defer the work; Workers, whose tasks belong to a request, run it at once.
// Asked inside each test: Workers allow no timer outside a request.
const defers = () => timersOutliveRequests();

test('queued work runs on the next macrotask, in order, after pending microtasks', async () => {
  const order: string[] = [];
  runOnNextTask(() => order.push('first'));
  runOnNextTask(() => order.push('second'));
  await Promise.resolve();
  order.push('microtask');
  assert.deepEqual(order, defers() ? ['microtask'] : ['first', 'second', 'microtask']);
  await nextMacrotask();
  await nextMacrotask();
  assert.deepEqual(
    order,
    defers() ? ['microtask', 'first', 'second'] : ['first', 'second', 'microtask'],
  );
});

test('a full queue runs at once: work never piles up while no macrotask runs', async () => {
  let ran = 0;
  for (let i = 0; i < MAX_QUEUED_WORK * 3; i++) {
    runOnNextTask(() => ran++);
    await Promise.resolve();
  }
  // Only microtasks so far: everything but what the last, partly filled queue holds has run.
  assert.ok(ran > MAX_QUEUED_WORK * 3 - MAX_QUEUED_WORK, `ran ${ran}`);
  await nextMacrotask();
  await nextMacrotask();
  assert.equal(ran, MAX_QUEUED_WORK * 3);
});

test('work that throws does not keep the rest of the queue from running', async () => {
  const ran: number[] = [];
  runOnNextTask(() => ran.push(1));
  if (defers()) {
    runOnNextTask(() => {
      throw new Error('work failed');
    });
  }
  runOnNextTask(() => ran.push(3));
  await nextMacrotask();
  await nextMacrotask();
  assert.deepEqual(ran, [1, 3]);
});

test('timers outlive requests on Node, Bun and Deno, and not on Workers', () => {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown; process?: unknown };
  const processRuntime = runtime.Bun !== undefined || runtime.Deno !== undefined ||
    (runtime.process !== undefined && typeof (globalThis as { WebSocketPair?: unknown })
          .WebSocketPair !== 'function');
  assert.equal(timersOutliveRequests(), processRuntime);
});
