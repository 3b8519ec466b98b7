import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AbilityHandlerError,
  AbilityValidationError,
  CapabilityAuthError,
  handlerFailureCause,
  hasSvcErrorShape,
  isRetryableStatusByDefault,
  opaqueHandlerFailure,
  opaqueHandlerFailureMessage,
  SvcConfigurationError,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
} from '../../src/core/errors.ts';

/** What Cap'n Web does to a received error: a plain Error plus its own enumerable properties. */
function receivedOverRpc(error: Error): Error {
  const copy = new Error(error.message);
  copy.name = error.name;
  for (const [key, value] of Object.entries(error)) {
    (copy as unknown as Record<string, unknown>)[key] = JSON.parse(JSON.stringify(value));
  }
  return copy;
}

function ownEnumerable(error: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(error));
}

test('taxonomy fields are own enumerable properties', () => {
  const errors = [
    new CapabilityAuthError('no token', { reason: 'missing_token' }),
    new AbilityValidationError('bad input', { issues: [{ message: 'x' }] }),
    new SvcTimeoutError(),
    new AbilityHandlerError('quota', { status: 429, reason: 'quota' }),
    new SvcInternalError('boom', { reason: 'bug' }),
    new SvcConfigurationError('bad option'),
  ];
  for (const error of errors) {
    for (const key of ['code', 'status', 'retryable', 'reason']) {
      const descriptor = Object.getOwnPropertyDescriptor(error, key);
      assert.ok(descriptor, `${error.name}.${key} is own`);
      assert.equal(descriptor.enumerable, true, `${error.name}.${key} is enumerable`);
      assert.ok('value' in descriptor, `${error.name}.${key} is a data property`);
    }
    assert.ok(error instanceof Error);
  }
  assert.deepEqual(ownEnumerable(new CapabilityAuthError('no', { status: 403, reason: 'scope' })), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'scope',
    name: 'CapabilityAuthError',
  });
});

test('error classes carry their names, codes and statuses', () => {
  const auth = new CapabilityAuthError('no token', { reason: 'missing_token' });
  assert.deepEqual([auth.name, auth.code, auth.status, auth.retryable], [
    'CapabilityAuthError',
    'capability_auth',
    401,
    false,
  ]);
  const input = new AbilityValidationError('bad input');
  assert.deepEqual([input.name, input.status, input.reason, input.issues], [
    'AbilityValidationError',
    422,
    'invalid_input',
    [],
  ]);
  const output = new AbilityValidationError('bad output', { status: 500 });
  assert.deepEqual([output.status, output.reason, output.retryable], [
    500,
    'invalid_output',
    false,
  ]);
  const timeout = new SvcTimeoutError();
  assert.deepEqual([timeout.name, timeout.code, timeout.status, timeout.retryable], [
    'SvcTimeoutError',
    'timeout',
    504,
    true,
  ]);
  const config = new SvcConfigurationError('bad');
  assert.deepEqual([config.code, config.status, config.retryable, config.reason], [
    'internal',
    500,
    false,
    'configuration',
  ]);
});

test('retryable defaults true for 408, 429, 502, 503, 504 and false otherwise', () => {
  for (const status of [408, 429, 502, 503, 504]) {
    assert.equal(isRetryableStatusByDefault(status), true, `${status}`);
    assert.equal(new AbilityHandlerError('x', { status }).retryable, true, `handler ${status}`);
    assert.equal(svcErrorInfo({ code: 'handler', status }).retryable, true, `received ${status}`);
  }
  for (const status of [400, 401, 403, 404, 409, 422, 500, 501, 505]) {
    assert.equal(isRetryableStatusByDefault(status), false, `${status}`);
    assert.equal(new AbilityHandlerError('x', { status }).retryable, false, `handler ${status}`);
  }
  assert.equal(new AbilityHandlerError('x').status, 500);
  assert.equal(new AbilityHandlerError('x').retryable, false);
});

test('AbilityHandlerError takes an explicit retryable over the status default', () => {
  const notRetryable = new AbilityHandlerError('down', { status: 503, retryable: false });
  assert.equal(notRetryable.retryable, false);
  assert.equal(svcErrorInfo(notRetryable).retryable, false);
  const retryable = new AbilityHandlerError('conflict', { status: 409, retryable: true });
  assert.equal(retryable.retryable, true);
  assert.deepEqual(svcErrorInfo(receivedOverRpc(retryable)), {
    code: 'handler',
    status: 409,
    retryable: true,
  });
});

test('AbilityHandlerError refuses a status, reason or retryable that could not be read back', () => {
  for (const status of [200, 399, 600, 429.5, Number.NaN, '429']) {
    assert.throws(
      () => new AbilityHandlerError('x', { status } as unknown as { status: number }),
      (error: unknown) =>
        error instanceof TypeError && /status must be an integer/.test(error.message),
      `status ${String(status)}`,
    );
  }
  for (const reason of ['quota exceeded', '', 'x'.repeat(257), 'naïve', 42]) {
    assert.throws(
      () => new AbilityHandlerError('x', { reason } as unknown as { reason: string }),
      (error: unknown) => error instanceof TypeError && /reason must be/.test(error.message),
      `reason ${String(reason).slice(0, 20)}`,
    );
  }
  for (const retryable of ['yes', 1, null]) {
    assert.throws(
      () => new AbilityHandlerError('x', { retryable } as unknown as { retryable: boolean }),
      (error: unknown) =>
        error instanceof TypeError && /retryable must be a boolean/.test(error.message),
    );
  }
  const longest = new AbilityHandlerError('x', {
    status: 599,
    reason: 'a.b:c-d_' + 'e'.repeat(248),
  });
  assert.deepEqual(svcErrorInfo(longest), {
    code: 'handler',
    status: 599,
    retryable: false,
    reason: 'a.b:c-d_' + 'e'.repeat(248),
  });
});

test('svcErrorInfo reads local and received errors alike', () => {
  const local = new AbilityHandlerError('Quota exceeded', {
    status: 429,
    retryable: true,
    reason: 'quota',
  });
  const expected = { code: 'handler', status: 429, retryable: true, reason: 'quota' };
  assert.deepEqual(svcErrorInfo(local), expected);
  const received = receivedOverRpc(local);
  assert.equal(received instanceof AbilityHandlerError, false);
  assert.deepEqual(svcErrorInfo(received), expected);
  assert.equal(hasSvcErrorShape(received), true);
});

test('svcErrorInfo: a received internal error is retryable only as its status allows, never beyond', () => {
  // A peer cannot make a 500 look transient...
  assert.deepEqual(svcErrorInfo({ code: 'internal', status: 500, retryable: true }), {
    code: 'internal',
    status: 500,
    retryable: false,
  });
  // ...may withhold retry from a 503...
  assert.equal(svcErrorInfo({ code: 'internal', status: 503, retryable: false }).retryable, false);
  // ...and a 503 or 502 is retryable as the taxonomy's default says.
  assert.equal(svcErrorInfo({ code: 'internal', status: 503 }).retryable, true);
  assert.equal(svcErrorInfo({ code: 'internal', status: 502, retryable: true }).retryable, true);
  assert.equal(svcErrorInfo({ code: 'internal', status: 405, retryable: true }).retryable, false);
});

test('svcErrorInfo: a received refusal can never read as retryable', () => {
  assert.deepEqual(svcErrorInfo({ code: 'capability_auth', retryable: true }), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
  });
  assert.deepEqual(svcErrorInfo({ code: 'capability_auth', status: 503, retryable: true }), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
  });
  assert.equal(svcErrorInfo({ code: 'capability_auth', status: 403 }).status, 403);
  assert.deepEqual(svcErrorInfo({ code: 'ability_validation', status: 503, retryable: true }), {
    code: 'ability_validation',
    status: 422,
    retryable: false,
  });
  assert.equal(svcErrorInfo({ code: 'ability_validation', status: 500 }).status, 500);
  assert.deepEqual(svcErrorInfo({ code: 'timeout', status: 400, retryable: false }), {
    code: 'timeout',
    status: 504,
    retryable: true,
  });
});

test('svcErrorInfo: a bogus or missing code reads as internal 500', () => {
  for (
    const value of [
      { code: 'teapot', status: 418, retryable: true },
      { code: 'CAPABILITY_AUTH', status: 401 },
      { code: 42 },
      new Error('plain'),
      Object.assign(new Error('fs'), { code: 'ENOENT' }),
      'capability_auth',
      null,
      undefined,
      42,
    ]
  ) {
    assert.deepEqual(svcErrorInfo(value), { code: 'internal', status: 500, retryable: false });
  }
  assert.equal(hasSvcErrorShape({ code: 'teapot' }), false);
  assert.equal(hasSvcErrorShape(null), false);
});

test('svcErrorInfo ignores a status outside 400..599', () => {
  for (const status of [200, 302, 399, 600, 1000, -1, 450.5, '503', NaN]) {
    assert.equal(svcErrorInfo({ code: 'handler', status }).status, 500, `handler ${status}`);
    assert.equal(svcErrorInfo({ code: 'internal', status }).status, 500, `internal ${status}`);
  }
  const internal = svcErrorInfo({ code: 'internal', status: 405 });
  assert.deepEqual(internal, { code: 'internal', status: 405, retryable: false });
  assert.equal(new SvcInternalError('stream over batch', { status: 405 }).status, 405);
  assert.equal(new SvcInternalError('x', { status: 99 }).status, 500);
});

test('svcErrorInfo keeps only a bounded reason of word characters, dot, colon and dash', () => {
  assert.equal(
    svcErrorInfo({ code: 'handler', reason: 'quota.exceeded:v2-a_b' }).reason,
    'quota.exceeded:v2-a_b',
  );
  assert.equal(svcErrorInfo({ code: 'handler', reason: 'r'.repeat(256) }).reason, 'r'.repeat(256));
  for (
    const reason of ['', 'has space', 'line\nbreak', '<script>', 'r'.repeat(257), 'ключ', 42, {}]
  ) {
    const info = svcErrorInfo({ code: 'handler', reason });
    assert.equal('reason' in info, false, `reason ${JSON.stringify(reason)}`);
  }
});

test('svcErrorInfo: a received handler error with a non-boolean retryable uses the default', () => {
  assert.equal(svcErrorInfo({ code: 'handler', status: 503, retryable: 'no' }).retryable, true);
  assert.equal(svcErrorInfo({ code: 'handler', status: 500, retryable: 1 }).retryable, false);
});

test('opaqueHandlerFailure hides the original behind a fixed message', () => {
  const original = new Error('SECRET-9 postgres://u:p@db');
  const opaque = opaqueHandlerFailure('fail', original);
  assert.equal(opaque.message, 'Svc ability handler failed: fail');
  assert.equal(opaqueHandlerFailureMessage('fail'), 'Svc ability handler failed: fail');
  assert.deepEqual(svcErrorInfo(opaque), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'handler_failed',
  });
  assert.equal('cause' in opaque, false);
  assert.equal(Object.hasOwn(opaque, 'cause'), false);
  assert.ok(!String(opaque.stack).includes('SECRET'));
  assert.ok(!String(opaque.stack).includes('.ts'), 'no file paths in the stack');
});

test('handlerFailureCause returns the original in-process only', () => {
  const original = new Error('SECRET-10');
  const opaque = opaqueHandlerFailure('fail', original);
  assert.equal(handlerFailureCause(opaque), original);
  assert.equal(handlerFailureCause(opaqueHandlerFailure('g', 'a string')), 'a string');
  assert.equal(handlerFailureCause(receivedOverRpc(opaque)), undefined);
  assert.equal(handlerFailureCause(new Error('other')), undefined);
  assert.equal(handlerFailureCause(null), undefined);
  assert.equal(handlerFailureCause('x'), undefined);
});

test('serialising the opaque error never carries the original message', () => {
  const opaque = opaqueHandlerFailure('fail', new Error('SECRET-11 /srv/app.ts'));
  const json = JSON.stringify({ ...opaque, message: opaque.message, stack: opaque.stack });
  assert.ok(!json.includes('SECRET'), json);
  assert.ok(!JSON.stringify(opaque).includes('SECRET'));
  const cloned = structuredClone(opaque);
  assert.equal(cloned.message, 'Svc ability handler failed: fail');
  assert.ok(
    !JSON.stringify({ ...cloned, message: cloned.message, stack: cloned.stack }).includes('SECRET'),
  );
  assert.equal((cloned as { cause?: unknown }).cause, undefined);
});

test('a taxonomy error passes an intermediate hop unchanged', () => {
  const first = receivedOverRpc(
    new CapabilityAuthError('scope missing', { status: 403, reason: 'missing_scope' }),
  );
  const second = receivedOverRpc(first);
  assert.equal(second.message, 'scope missing');
  assert.deepEqual(svcErrorInfo(second), svcErrorInfo(first));
  assert.deepEqual(svcErrorInfo(second), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'missing_scope',
  });
});

test('AbilityValidationError issues survive as an own enumerable property', () => {
  const error = new AbilityValidationError('bad', {
    issues: [{ message: 'Required', path: ['a', 0] }],
  });
  const received = receivedOverRpc(error) as unknown as { issues: unknown };
  assert.deepEqual(received.issues, [{ message: 'Required', path: ['a', 0] }]);
});

test('a thrown value whose fields throw when read is no taxonomy error, and reading it never throws', () => {
  const hostile = new Error('boom');
  for (const field of ['code', 'status', 'retryable', 'reason']) {
    Object.defineProperty(hostile, field, {
      get() {
        throw new Error('SECRET-from-getter');
      },
    });
  }
  assert.equal(hasSvcErrorShape(hostile), false);
  assert.deepEqual(svcErrorInfo(hostile), { code: 'internal', status: 500, retryable: false });
  const proxy = new Proxy({}, {
    get() {
      throw new Error('SECRET-from-proxy');
    },
  });
  assert.equal(hasSvcErrorShape(proxy), false);
  assert.deepEqual(svcErrorInfo(proxy), { code: 'internal', status: 500, retryable: false });
});
