import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ResolvedTarget } from '../../src/plane/catalog.ts';
import type { ServiceGrant } from '../../src/plane/endpoints.ts';
import {
  checkGrant,
  grantedScopes,
  normalizeScopes,
  publishedScopes,
} from '../../src/plane/grants.ts';
import { rejectsWithInfo } from '../support/ability-fixtures.ts';
import { discoveryDocumentFor, fakeService } from './discovery-fixtures.ts';

function targetWith(grants: ServiceGrant[], id = 'svc-a'): ResolvedTarget {
  return { endpoint: fakeService(id, { grants }).endpoint, document: discoveryDocumentFor(id) };
}

/** Asserts that a synchronous check throws a 403 capability refusal with `reason`. */
async function refused(
  check: () => void,
  expected: { reason: string; message?: RegExp },
): Promise<void> {
  const error = await rejectsWithInfo((async () => check())(), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: expected.reason,
  });
  if (expected.message !== undefined) assert.match(error.message, expected.message);
}

test('normalizeScopes sorts and de-duplicates', () => {
  assert.deepEqual(normalizeScopes(['b', 'a', 'b', 'C']), ['C', 'a', 'b']);
  assert.deepEqual(normalizeScopes([]), []);
  const input = ['z', 'y'];
  normalizeScopes(input);
  assert.deepEqual(input, ['z', 'y'], 'the input is not reordered in place');
});

test('normalizeScopes refuses wildcards (HMAC-16: ["*"], ["svc-a.*"]) as unknown scopes', async () => {
  await refused(() => normalizeScopes(['*']), { reason: 'unknown_scope', message: /\*/ });
  await refused(() => normalizeScopes(['svc-a.read', 'svc-a.*']), {
    reason: 'unknown_scope',
    message: /svc-a\.\*/,
  });
});

test('normalizeScopes refuses empty, non-string and whitespace scope names', async () => {
  for (const scopes of [[''], ['a b'], ['tab\t'], [42], [null], 'svc-a.read']) {
    await refused(() => normalizeScopes(scopes as string[]), { reason: 'invalid_scope' });
  }
});

test('normalizeScopes refuses a malformed name every time, also after many well-formed ones passed', async () => {
  const bad = [['a b'], ['zero\u200bwidth'], ['svc-a.*'], ['']];
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 1500; i++) {
      assert.deepEqual(normalizeScopes([`svc-${round}.scope-${i}`]), [`svc-${round}.scope-${i}`]);
    }
    for (const scopes of bad) {
      await refused(() => normalizeScopes(['svc-a.read', ...scopes]), {
        reason: scopes[0].includes('*') ? 'unknown_scope' : 'invalid_scope',
      });
    }
  }
});

test('publishedScopes collects ability, method and capability-catalog scopes', () => {
  assert.deepEqual(
    [...publishedScopes(discoveryDocumentFor('svc-a'))].sort(),
    ['svc-a.admin', 'svc-a.read', 'svc-a.use', 'svc-a.write'],
  );
});

test('publishedScopes of a document without a capability catalog', () => {
  const document = { ...discoveryDocumentFor('svc-a') };
  delete document.capabilities;
  assert.deepEqual(
    [...publishedScopes(document)].sort(),
    ['svc-a.read', 'svc-a.use', 'svc-a.write'],
  );
});

test("grantedScopes reads only the named caller's grant", () => {
  const target = targetWith([
    { caller: 'caller-1', scopes: ['svc-a.read'] },
    { caller: 'caller-2', scopes: ['svc-a.write', 'svc-a.admin'] },
  ]);
  assert.deepEqual([...grantedScopes(target, 'caller-1')], ['svc-a.read']);
  assert.deepEqual([...grantedScopes(target, 'caller-2')].sort(), ['svc-a.admin', 'svc-a.write']);
  assert.equal(grantedScopes(target, 'caller-3').size, 0);
});

test('checkGrant passes for published, granted scopes and an existing ability', () => {
  const target = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read', 'svc-a.use'] }]);
  checkGrant(target, 'caller-1', ['svc-a.read']);
  checkGrant(target, 'caller-1', ['svc-a.use', 'svc-a.read', 'svc-a.read'], 'svc-a.main');
  checkGrant(target, 'caller-1', [], 'svc-a.main');
});

test('HMAC-16 a scope the target does not publish is refused with unknown_scope naming it and the target', async () => {
  // Granted in configuration, but no longer published by the service.
  const target = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read', 'svc-a.retired'] }]);
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.read', 'svc-a.retired']), {
    reason: 'unknown_scope',
    message: /svc-a\.retired.*svc-a/,
  });
});

test('HMAC-16 a published scope not granted to the caller is refused with grant_denied', async () => {
  const target = targetWith([
    { caller: 'caller-1', scopes: ['svc-a.read'] },
    { caller: 'caller-2', scopes: ['svc-a.write'] },
  ]);
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.read', 'svc-a.write']), {
    reason: 'grant_denied',
    message: /svc-a\.write.*svc-a.*caller-1/,
  });
  await refused(() => checkGrant(target, 'caller-3', ['svc-a.read']), {
    reason: 'grant_denied',
  });
});

test('HMAC-16 wildcard requests are refused even when a literal scope would match', async () => {
  const target = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read'] }]);
  await refused(() => checkGrant(target, 'caller-1', ['*']), { reason: 'unknown_scope' });
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.*']), { reason: 'unknown_scope' });
});

test('checkGrant refuses an ability the target does not declare with unknown_ability', async () => {
  const target = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read'] }]);
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.read'], 'svc-a.other'), {
    reason: 'unknown_ability',
    message: /svc-a\.other/,
  });
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.read'], 'svc-b.main'), {
    reason: 'unknown_ability',
  });
});

test('checkGrant checks scopes before the ability, and publication before the grant', async () => {
  const target = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read'] }]);
  await refused(() => checkGrant(target, 'caller-1', ['svc-a.nope'], 'svc-a.missing'), {
    reason: 'unknown_scope',
  });
  await refused(() => checkGrant(target, 'caller-2', ['svc-a.nope']), { reason: 'unknown_scope' });
});

test('grants of one target never leak into another', async () => {
  const a = targetWith([{ caller: 'caller-1', scopes: ['svc-a.read'] }], 'svc-a');
  const b = targetWith([], 'svc-b');
  checkGrant(a, 'caller-1', ['svc-a.read']);
  await refused(() => checkGrant(b, 'caller-1', ['svc-b.read']), { reason: 'grant_denied' });
  await refused(() => checkGrant(b, 'caller-1', ['svc-a.read']), { reason: 'unknown_scope' });
  await refused(() => checkGrant(b, 'caller-1', ['svc-b.use']), { reason: 'grant_denied' });
});
