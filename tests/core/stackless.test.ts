import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stacklessError, withoutStackCapture } from '../../src/core/stackless.ts';

/** Lines of a stack that name a frame (every engine starts them with `at ` or `name@`). */
function frames(error: Error): string[] {
  return (error.stack ?? '').split('\n').filter((line) => /^\s*at |@/.test(line));
}

test('a stackless error carries its message and no frame', () => {
  const error = stacklessError('batch ended');
  assert.equal(error.message, 'batch ended');
  assert.ok(error instanceof Error);
  assert.deepEqual(frames(error), []);
});

test('stack capture is back on after the work, even when it throws', () => {
  assert.throws(() =>
    withoutStackCapture(() => {
      throw new Error('inside');
    }), /inside/);
  assert.ok(frames(new Error('after')).length > 0, 'errors after the work have their stacks');
});
