// The caller-side reading of validation issues: bounded, malformed records dropped, and the guard
// that narrows an error to an ability_validation refusal only when its fields were made to fit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AbilityHandlerError, AbilityValidationError } from '../../src/core/errors.ts';
import {
  isAbilityValidationError,
  MAX_VALIDATION_ISSUE_MESSAGE_LENGTH,
  MAX_VALIDATION_ISSUE_PATH_DEPTH,
  MAX_VALIDATION_ISSUE_PATH_KEY_LENGTH,
  MAX_VALIDATION_ISSUES,
  readValidationIssues,
} from '../../src/core/validation-issues.ts';

test('readValidationIssues keeps { message, path? } records and drops what does not fit', () => {
  const issues = readValidationIssues([
    { message: 'Required', path: ['items', 0, 'name'] },
    { message: 'unwrapped', path: [{ key: 'a' }, { key: 1 }] },
    { message: 'no path' },
    { message: 7 },
    'a string',
    null,
    { message: 'a symbol in the path', path: ['a', Symbol('s')] },
    { message: 'an object in the path', path: [{}] },
    { message: 'NaN in the path', path: [Number.NaN] },
    { message: 'a fraction in the path', path: ['a', 1.5] },
    { message: 'a path that is no list', path: 'a.b' },
    { message: 'extra members', path: ['x'], input: 'secret', code: 'too_small' },
  ]);
  assert.deepEqual(issues, [
    { message: 'Required', path: ['items', 0, 'name'] },
    { message: 'unwrapped', path: ['a', 1] },
    { message: 'no path' },
    { message: 'a symbol in the path' },
    { message: 'an object in the path' },
    { message: 'NaN in the path' },
    { message: 'a fraction in the path' },
    { message: 'a path that is no list' },
    { message: 'extra members', path: ['x'] },
  ]);
  assert.equal(readValidationIssues('issues'), undefined);
  assert.equal(readValidationIssues({ length: 2, 0: { message: 'm' } }), undefined);
});

test('readValidationIssues bounds the count, the message, the path depth and a key', () => {
  const many = Array.from({ length: MAX_VALIDATION_ISSUES * 3 }, (_, i) => ({ message: `${i}` }));
  const read = readValidationIssues(many)!;
  assert.equal(read.length, MAX_VALIDATION_ISSUES);
  assert.equal(read.at(-1)?.message, String(MAX_VALIDATION_ISSUES - 1));
  const long = 'x'.repeat(MAX_VALIDATION_ISSUE_MESSAGE_LENGTH + 10);
  const [cut] = readValidationIssues([{ message: long }])!;
  assert.equal(cut.message, `${'x'.repeat(MAX_VALIDATION_ISSUE_MESSAGE_LENGTH)}…`);
  const deep = Array.from({ length: MAX_VALIDATION_ISSUE_PATH_DEPTH + 1 }, () => 'a');
  const longKey = 'k'.repeat(MAX_VALIDATION_ISSUE_PATH_KEY_LENGTH + 1);
  assert.deepEqual(readValidationIssues([{ message: 'deep', path: deep }]), [{ message: 'deep' }]);
  assert.deepEqual(readValidationIssues([{ message: 'key', path: [longKey] }]), [
    { message: 'key' },
  ]);
  const atLimit = deep.slice(1);
  assert.deepEqual(readValidationIssues([{ message: 'at the limit', path: atLimit }]), [
    { message: 'at the limit', path: atLimit },
  ]);
  // A sparse list claiming billions of entries costs no more than the bound.
  const sparse: unknown[] = [];
  sparse.length = 2 ** 32 - 1;
  sparse[3] = { message: 'lone' };
  assert.deepEqual(readValidationIssues(sparse), [{ message: 'lone' }]);
});

test('readValidationIssues stops at a member whose reading throws, keeping what it read', () => {
  const hostile = [
    { message: 'first' },
    {
      get message(): string {
        throw new Error('getter');
      },
    },
    { message: 'never read' },
  ];
  assert.deepEqual(readValidationIssues(hostile), [{ message: 'first' }]);
});

test('isAbilityValidationError narrows a local refusal and leaves its issues as they were', () => {
  const local = new AbilityValidationError('invalid', {
    issues: [{ message: 'Required', path: ['id'] }],
  });
  assert.equal(isAbilityValidationError(local), true);
  if (!isAbilityValidationError(local)) return;
  const issues: readonly { message: string; path?: (string | number)[] }[] = local.issues;
  assert.deepEqual(issues, [{ message: 'Required', path: ['id'] }]);
  assert.equal(local.status, 422);
  assert.equal(local.retryable, false);
  assert.equal(local.reason, 'invalid_input');
  const output = new AbilityValidationError('bad output', { status: 500 });
  assert.equal(isAbilityValidationError(output) && output.status, 500);
  assert.deepEqual(isAbilityValidationError(output) && output.issues, []);
});

test('isAbilityValidationError refuses other errors and values that are no errors', () => {
  assert.equal(isAbilityValidationError(new AbilityHandlerError('no', { status: 422 })), false);
  assert.equal(isAbilityValidationError(new Error('plain')), false);
  assert.equal(isAbilityValidationError({ code: 'ability_validation', issues: [] }), false);
  assert.equal(isAbilityValidationError('ability_validation'), false);
  assert.equal(isAbilityValidationError(null), false);
  const wrongCode = Object.assign(new Error('x'), { code: 'ability_validation ', issues: [] });
  assert.equal(isAbilityValidationError(wrongCode), false);
});

test('isAbilityValidationError pins what a peer forged and replaces malformed issues', () => {
  const forged = Object.assign(new Error('forged'), {
    code: 'ability_validation',
    status: 200,
    retryable: true,
    reason: 'not a reason!',
    issues: [{ message: 'kept', path: ['a', { key: 'b' }] }, { message: { toString: 1 } }, 42],
  });
  assert.equal(isAbilityValidationError(forged), true);
  assert.equal(forged.status, 422);
  assert.equal(forged.retryable, false);
  assert.equal('reason' in forged, false);
  assert.deepEqual(forged.issues, [{ message: 'kept', path: ['a', 'b'] }]);
  const noList = Object.assign(new Error('forged'), {
    code: 'ability_validation',
    status: 500,
    issues: 'everything',
  });
  assert.equal(isAbilityValidationError(noList), true);
  assert.deepEqual(noList.issues, []);
  assert.equal(noList.status, 500);
  // Reading twice gives the same answer: the normalised error already fits.
  assert.equal(isAbilityValidationError(forged), true);
  assert.deepEqual(forged.issues, [{ message: 'kept', path: ['a', 'b'] }]);
});

test('isAbilityValidationError reports no refusal it could not make fit', () => {
  const frozen = Object.freeze(
    Object.assign(new Error('frozen'), { code: 'ability_validation', status: 422, issues: 'x' }),
  );
  assert.equal(isAbilityValidationError(frozen), false);
  const throwing = Object.assign(new Error('getter'), { code: 'ability_validation' });
  Object.defineProperty(throwing, 'issues', {
    get() {
      throw new Error('no');
    },
    configurable: true,
    enumerable: true,
  });
  assert.ok(isAbilityValidationError(throwing));
  assert.deepEqual(throwing.issues, []);
});
