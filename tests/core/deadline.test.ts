import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  applyTimeoutPolicy,
  callerWaitMs,
  deadlineFromBudget,
  DEFAULT_ABILITY_TIMEOUT_MS,
  earliestBudgetMs,
  effectiveMethodCeilingMs,
  MAX_METHOD_TIMEOUT_MS,
  MAX_SVC_TIMEOUT_MS,
  normalizeTimeoutBudget,
  parseTimeoutBudget,
  SVC_TIMEOUT_GRACE_MS,
  SVC_TIMEOUT_HEADER,
  SVC_TIMEOUT_QUERY_PARAM,
  validateMethodTimeoutMs,
  validateServiceMethodCeiling,
  validateTimeoutPolicy,
} from '../../src/core/deadline.ts';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';

function assertConfigurationError(run: () => unknown, ...mentions: string[]): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, `expected SvcConfigurationError: ${error}`);
    for (const mention of mentions) {
      assert.ok(error.message.includes(mention), `"${error.message}" should name ${mention}`);
    }
    assert.equal(svcErrorInfo(error).code, 'internal');
    return true;
  });
}

test('limits constants match the contract table', () => {
  assert.equal(DEFAULT_ABILITY_TIMEOUT_MS, 10_000);
  assert.equal(MAX_SVC_TIMEOUT_MS, 600_000);
  assert.equal(SVC_TIMEOUT_GRACE_MS, 250);
  assert.equal(SVC_TIMEOUT_HEADER, 'X-Svc-Timeout');
  assert.equal(SVC_TIMEOUT_QUERY_PARAM, 'timeout');
  assert.equal(MAX_METHOD_TIMEOUT_MS, 86_400_000);
});

test('DL-01 malformed budgets are ignored', () => {
  for (const raw of ['-5', '0', '1.5', '1e3', 'abc', '0x10', '', '5000 x']) {
    assert.equal(parseTimeoutBudget(raw), undefined, `budget ${JSON.stringify(raw)}`);
  }
});

test('parseTimeoutBudget ignores whitespace, signs, separators and absent values', () => {
  for (const raw of [' 5', '5 ', '+5', '5\n', '1_000', '1,000', '٣', '00', '0'.repeat(40)]) {
    assert.equal(parseTimeoutBudget(raw), undefined, `budget ${JSON.stringify(raw)}`);
  }
  assert.equal(parseTimeoutBudget(null), undefined);
  assert.equal(parseTimeoutBudget(undefined), undefined);
});

test('DL-05 a budget of any length clamps to MAX_SVC_TIMEOUT_MS, never reads as absent', () => {
  for (const raw of ['1'.repeat(17), '100000000000000000', '9'.repeat(400), '600001']) {
    assert.equal(parseTimeoutBudget(raw), MAX_SVC_TIMEOUT_MS, `budget ${raw.slice(0, 20)}`);
  }
});

test('callerWaitMs stays within the timer range, so a long budget never fires at once', () => {
  assert.equal(callerWaitMs(1000), 1000 + SVC_TIMEOUT_GRACE_MS);
  for (const budget of [2 ** 31, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
    const wait = callerWaitMs(budget);
    assert.ok(wait > 2 ** 30 && wait <= 2 ** 31 - 1, `budget ${budget}: ${wait}`);
  }
});

test('parseTimeoutBudget accepts plain positive integers', () => {
  assert.equal(parseTimeoutBudget('1'), 1);
  assert.equal(parseTimeoutBudget('5000'), 5000);
  assert.equal(parseTimeoutBudget('0500'), 500);
  assert.equal(parseTimeoutBudget('600000'), 600_000);
});

test('DL-02 an oversized budget is clamped to MAX_SVC_TIMEOUT_MS', () => {
  assert.equal(parseTimeoutBudget('700000'), MAX_SVC_TIMEOUT_MS);
  assert.equal(parseTimeoutBudget('9'.repeat(16)), MAX_SVC_TIMEOUT_MS);
  const start = 1_000_000;
  const deadline = deadlineFromBudget(parseTimeoutBudget('700000'), start, () => start + 1);
  const remaining = deadline.remainingMs();
  assert.ok(remaining !== undefined && remaining > 599_000 && remaining <= 600_000);
});

test('DL-05 WebSocket timeout query values are ignored or clamped', () => {
  const url = new URL('wss://svc.example/rpc/a?timeout=-1');
  assert.equal(parseTimeoutBudget(url.searchParams.get(SVC_TIMEOUT_QUERY_PARAM)), undefined);
  url.searchParams.set(SVC_TIMEOUT_QUERY_PARAM, 'abc');
  assert.equal(parseTimeoutBudget(url.searchParams.get(SVC_TIMEOUT_QUERY_PARAM)), undefined);
  url.searchParams.set(SVC_TIMEOUT_QUERY_PARAM, '1e9');
  assert.equal(parseTimeoutBudget(url.searchParams.get(SVC_TIMEOUT_QUERY_PARAM)), undefined);
  url.searchParams.set(SVC_TIMEOUT_QUERY_PARAM, '1000000000');
  assert.equal(parseTimeoutBudget(url.searchParams.get(SVC_TIMEOUT_QUERY_PARAM)), 600_000);
});

test('normalizeTimeoutBudget keeps positive safe integers and clamps them', () => {
  assert.equal(normalizeTimeoutBudget(1), 1);
  assert.equal(normalizeTimeoutBudget(5000), 5000);
  assert.equal(normalizeTimeoutBudget(700_000), MAX_SVC_TIMEOUT_MS);
  assert.equal(normalizeTimeoutBudget(1e9), MAX_SVC_TIMEOUT_MS);
  for (const value of [0, -1, -0, 1.5, NaN, Infinity, -Infinity, 2 ** 60, '5000', null, {}]) {
    assert.equal(normalizeTimeoutBudget(value), undefined, `value ${String(value)}`);
  }
  assert.equal(normalizeTimeoutBudget(undefined), undefined);
});

test('validateTimeoutPolicy accepts valid policies and copies only its fields', () => {
  assert.deepEqual(validateTimeoutPolicy(undefined, 'plane'), {});
  assert.deepEqual(validateTimeoutPolicy({}, 'plane'), {});
  assert.deepEqual(validateTimeoutPolicy({ defaultMs: 2000, maxMs: 5000 }, 'plane'), {
    defaultMs: 2000,
    maxMs: 5000,
  });
  assert.deepEqual(validateTimeoutPolicy({ defaultMs: 5000, maxMs: 5000 }, 'plane'), {
    defaultMs: 5000,
    maxMs: 5000,
  });
  const serviceFields = ['methodMs', 'defaultMs', 'maxMs'];
  assert.deepEqual(
    validateTimeoutPolicy({ maxMs: 600_000, methodMs: false }, 'svc', serviceFields),
    { maxMs: 600_000 },
  );
});

test('validateTimeoutPolicy refuses a key it was not told of, naming it', () => {
  assertConfigurationError(
    () => validateTimeoutPolicy({ maxMs: 2000, defaultMS: 500 }, 'plane'),
    'plane',
    'unknown option `defaultMS` (accepted: defaultMs, maxMs)',
  );
  assertConfigurationError(
    () => validateTimeoutPolicy({ methodMs: 5 }, 'plane'),
    'plane',
    'unknown option `methodMs`',
  );
});

test('validateTimeoutPolicy refuses 0, negatives, fractions, non-numbers and oversized values', () => {
  for (const field of ['defaultMs', 'maxMs']) {
    for (const value of [0, -1, 1.5, NaN, Infinity, '1000', null, true, 600_001]) {
      assertConfigurationError(
        () => validateTimeoutPolicy({ [field]: value }, 'svc-a'),
        'svc-a',
        field,
      );
    }
  }
});

test('validateTimeoutPolicy refuses defaultMs above maxMs and non-object policies', () => {
  assertConfigurationError(
    () => validateTimeoutPolicy({ defaultMs: 5000, maxMs: 1000 }, 'plane'),
    'plane',
    'defaultMs',
    'maxMs',
  );
  for (const policy of [null, 5, 'fast', [], true]) {
    assertConfigurationError(() => validateTimeoutPolicy(policy, 'plane'), 'plane', 'timeout');
  }
});

test('applyTimeoutPolicy uses defaultMs only on per-call transports without a budget', () => {
  const policy = { defaultMs: 2000, maxMs: 5000 };
  assert.equal(applyTimeoutPolicy(undefined, policy, { perCallTransport: true }), 2000);
  assert.equal(applyTimeoutPolicy(undefined, policy, { perCallTransport: false }), undefined);
  assert.equal(applyTimeoutPolicy(300, policy, { perCallTransport: true }), 300);
  assert.equal(applyTimeoutPolicy(undefined, undefined, { perCallTransport: true }), undefined);
  assert.equal(applyTimeoutPolicy(undefined, {}, { perCallTransport: true }), undefined);
});

test('applyTimeoutPolicy clamps any budget to maxMs', () => {
  const policy = { maxMs: 5000 };
  assert.equal(applyTimeoutPolicy(9000, policy, { perCallTransport: true }), 5000);
  assert.equal(applyTimeoutPolicy(9000, policy, { perCallTransport: false }), 5000);
  assert.equal(applyTimeoutPolicy(4000, policy, { perCallTransport: false }), 4000);
  assert.equal(applyTimeoutPolicy(0, policy, { perCallTransport: true }), 0);
  assert.equal(applyTimeoutPolicy(undefined, policy, { perCallTransport: true }), undefined);
});

test('validateMethodTimeoutMs accepts 0 and integers up to 24 hours', () => {
  assert.equal(validateMethodTimeoutMs(undefined, 'svc.a.m'), undefined);
  assert.equal(validateMethodTimeoutMs(0, 'svc.a.m'), 0);
  assert.equal(validateMethodTimeoutMs(200, 'svc.a.m'), 200);
  // Not clamped to the 10-minute wire limit.
  assert.equal(validateMethodTimeoutMs(3_600_000, 'svc.a.m'), 3_600_000);
  assert.equal(validateMethodTimeoutMs(86_400_000, 'svc.a.m'), 86_400_000);
});

test('validateMethodTimeoutMs refuses negative, fractional, non-number and absurd values', () => {
  for (const value of [-1, 1.5, NaN, Infinity, '200', null, false, 86_400_001, 1e15]) {
    assertConfigurationError(() => validateMethodTimeoutMs(value, 'svc.a.m'), 'svc.a.m');
  }
});

test('validateServiceMethodCeiling accepts false and positive integers up to 24 hours', () => {
  assert.equal(validateServiceMethodCeiling(undefined, 'svc'), undefined);
  assert.equal(validateServiceMethodCeiling(false, 'svc'), false);
  assert.equal(validateServiceMethodCeiling(1, 'svc'), 1);
  assert.equal(validateServiceMethodCeiling(86_400_000, 'svc'), 86_400_000);
  for (const value of [0, -5, 2.5, true, '1000', null, 86_400_001]) {
    assertConfigurationError(() => validateServiceMethodCeiling(value, 'svc-b'), 'svc-b');
  }
});

test('effectiveMethodCeilingMs: method wins, 0 and false opt out, streams use only their own', () => {
  assert.equal(effectiveMethodCeilingMs({}), DEFAULT_ABILITY_TIMEOUT_MS);
  assert.equal(effectiveMethodCeilingMs({ serviceMethodMs: 3000 }), 3000);
  assert.equal(effectiveMethodCeilingMs({ serviceMethodMs: false }), undefined);
  assert.equal(effectiveMethodCeilingMs({ methodTimeoutMs: 200, serviceMethodMs: 3000 }), 200);
  assert.equal(effectiveMethodCeilingMs({ methodTimeoutMs: 0, serviceMethodMs: 3000 }), undefined);
  assert.equal(effectiveMethodCeilingMs({ stream: true }), undefined);
  assert.equal(effectiveMethodCeilingMs({ stream: true, serviceMethodMs: 3000 }), undefined);
  assert.equal(effectiveMethodCeilingMs({ stream: true, methodTimeoutMs: 700 }), 700);
});

test('DL-07 earliestBudgetMs picks whichever expires first', () => {
  assert.equal(earliestBudgetMs(200, 5000), 200);
  assert.equal(earliestBudgetMs(1000, 100), 100);
  assert.equal(earliestBudgetMs(undefined, 100), 100);
  assert.equal(earliestBudgetMs(100, undefined), 100);
  assert.equal(earliestBudgetMs(undefined, undefined), undefined);
  assert.equal(earliestBudgetMs(), undefined);
  assert.equal(earliestBudgetMs(0, 100), 0);
});

test('deadlineFromBudget: unbounded without a budget', () => {
  const deadline = deadlineFromBudget(undefined);
  assert.equal(deadline.endsAt, undefined);
  assert.equal(deadline.remainingMs(), undefined);
  assert.equal(deadline.expired(), false);
});

test('deadlineFromBudget measures what is left on the local clock', () => {
  let now = 50_000;
  const deadline = deadlineFromBudget(1000, now, () => now);
  assert.equal(deadline.endsAt, 51_000);
  assert.equal(deadline.remainingMs(), 1000);
  assert.equal(deadline.expired(), false);
  now += 400;
  assert.equal(deadline.remainingMs(), 600);
  now += 600;
  assert.equal(deadline.remainingMs(), 0);
  assert.equal(deadline.expired(), true);
  now += 5000;
  assert.equal(deadline.remainingMs(), 0, 'never negative');
});

test('deadlineFromBudget: a zero, negative or NaN budget is already spent', () => {
  for (const budget of [0, -10, NaN]) {
    const deadline = deadlineFromBudget(budget, 1000, () => 1000);
    assert.equal(deadline.remainingMs(), 0, `budget ${budget}`);
    assert.equal(deadline.expired(), true, `budget ${budget}`);
  }
});

test('deadlineFromBudget defaults to the real clock', async () => {
  const deadline = deadlineFromBudget(60_000);
  const remaining = deadline.remainingMs();
  assert.ok(remaining !== undefined && remaining > 0 && remaining <= 60_000);
  assert.ok(deadline.endsAt !== undefined && deadline.endsAt >= Date.now());
  const spent = deadlineFromBudget(1);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(spent.expired(), true);
});

test('callerWaitMs adds the grace period', () => {
  assert.equal(callerWaitMs(1000), 1250);
  assert.equal(callerWaitMs(MAX_SVC_TIMEOUT_MS), 600_250);
});
