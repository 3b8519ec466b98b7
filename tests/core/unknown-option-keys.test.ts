// Design principle "fail closed, say why; nothing silently dropped": a key no reader knows is
// refused where the options object is read, with a message naming it and the accepted keys.
// Core readers here; the service and plane constructors have their own files.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { refuseUnknownKeys } from '../../src/core/config-values.ts';
import { firstUnknownKey, unknownKeyProblem } from '../../src/core/unknown-keys.ts';
import { validateTimeoutPolicy } from '../../src/core/deadline.ts';
import { AbilityHandlerError, SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { resolveHttpCache } from '../../src/core/http-cache.ts';
import { verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { staticJwks } from '../../src/service/jwks-sources.ts';
import { resolveServeOptions } from '../../src/adapters/serve-target.ts';
import { refusedNaming } from '../support/configuration-refusals.ts';

test('refuseUnknownKeys names the label, the key and the accepted keys, with a configuration reason', () => {
  const error = refusedNaming(
    () => refuseUnknownKeys({ id: 'a', ingres: {} }, ['id', 'ingress'], 'createService'),
  );
  assert.equal(error.message, 'createService: unknown option `ingres` (accepted: id, ingress)');
  assert.deepEqual(svcErrorInfo(error), {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'configuration',
  });
});

test('refuseUnknownKeys accepts known keys, counts a key holding undefined, and takes noun, reason and advice', () => {
  refuseUnknownKeys({ id: 'a', ingress: undefined }, ['id', 'ingress'], 'x');
  refuseUnknownKeys({}, [], 'x');
  refusedNaming(() => refuseUnknownKeys({ ingres: undefined }, ['ingress'], 'x'), '`ingres`');
  const error = refusedNaming(
    () =>
      refuseUnknownKeys({ titel: 'a' }, ['title'], 'defineAbility(svc-a.x)', {
        noun: 'field',
        reason: 'invalid_ability',
        advice: 'Did you mean title?',
      }),
  );
  assert.equal(
    error.message,
    'defineAbility(svc-a.x): unknown field `titel` (accepted: title). Did you mean title?',
  );
  assert.equal(error.reason, 'invalid_ability');
});

test('firstUnknownKey and unknownKeyProblem: the first stray key, quoted when it would garble the message', () => {
  assert.equal(firstUnknownKey({ a: 1, b: 2, c: 3 }, ['a']), 'b');
  assert.equal(firstUnknownKey({ a: 1 }, ['a', 'b']), undefined);
  assert.equal(
    unknownKeyProblem('a`b\n', ['x']),
    'unknown option `"a`b\\n"` (accepted: x)',
  );
  assert.equal(unknownKeyProblem('x'.repeat(100), ['y']).length < 120, true);
});

test('AbilityHandlerError: a misspelt `retriable` is a TypeError naming the key, not a non-retryable error', () => {
  assert.throws(
    () => new AbilityHandlerError('conflict', { status: 409, retriable: true } as never),
    (error: unknown) =>
      error instanceof TypeError &&
      error.message ===
        'AbilityHandlerError: unknown option `retriable` (accepted: reason, retryable, status)',
  );
  assert.throws(() => new AbilityHandlerError('x', null as never), TypeError);
  const accepted = new AbilityHandlerError('conflict', {
    status: 409,
    retryable: true,
    reason: 'version_conflict',
  });
  assert.deepEqual(svcErrorInfo(accepted), {
    code: 'handler',
    status: 409,
    retryable: true,
    reason: 'version_conflict',
  });
});

test('timeout policy: a misspelt `defaultMS` or `maxMS` is refused, every documented field accepted', () => {
  refusedNaming(
    () => validateTimeoutPolicy({ maxMs: 2000, defaultMS: 500 }, 'createService: `timeout`'),
    'createService: `timeout`',
    'unknown option `defaultMS` (accepted: defaultMs, maxMs)',
  );
  refusedNaming(
    () => validateTimeoutPolicy({ defaultMs: 500, maxMS: 1000 }, 'createControlPlane: `timeout`'),
    '`maxMS`',
  );
  assert.deepEqual(validateTimeoutPolicy({ defaultMs: 500, maxMs: 1000 }, 'p'), {
    defaultMs: 500,
    maxMs: 1000,
  });
});

test('httpCache: an unknown field is refused in the shared wording, the documented ones accepted', () => {
  const error = refusedNaming(
    () => resolveHttpCache({ maxAge: 5 }, 'createService: `httpCache`'),
    'createService: `httpCache`: unknown option `maxAge` ',
    '(accepted: maxAgeSeconds, staleWhileRevalidateSeconds, tags)',
  );
  assert.equal(error.reason, 'invalid_http_cache');
  assert.deepEqual(
    resolveHttpCache(
      { maxAgeSeconds: 5, staleWhileRevalidateSeconds: 0, tags: ['t'] },
      'createService: `httpCache`',
    ),
    { maxAgeSeconds: 5, staleWhileRevalidateSeconds: 0, tags: ['t'] },
  );
});

test('verifyCapabilityToken: a misspelt option is refused before the token is read', async () => {
  const keys = staticJwks({ keys: [] });
  await assert.rejects(
    verifyCapabilityToken('x.y.z', { keys, issuer: 'p', audience: 'a', clockSkew: 5 } as never),
    (error: unknown) =>
      error instanceof SvcConfigurationError &&
      error.message ===
        'verifyCapabilityToken: unknown option `clockSkew` (accepted: keys, issuer, audience, now)',
  );
  // With the documented options the token itself is what gets refused.
  await assert.rejects(
    verifyCapabilityToken('x.y.z', { keys, issuer: 'p', audience: 'a', now: () => 0 }),
    (error: unknown) => svcErrorInfo(error).code === 'capability_auth',
  );
});

test('serve options: each helper refuses the keys it does not take, in the shared wording', () => {
  refusedNaming(
    () => resolveServeOptions({ prot: 8080 }, 'serveNode'),
    'serveNode: unknown option `prot` (accepted: port, hostname, env)',
  );
  refusedNaming(
    () => resolveServeOptions({ port: 8080 }, 'attachWebSocketUpgrades', ['env']),
    'attachWebSocketUpgrades: unknown option `port` (accepted: env)',
  );
  assert.deepEqual(resolveServeOptions({ env: { A: 1 } }, 'attachWebSocketUpgrades', ['env']).env, {
    A: 1,
  });
});
