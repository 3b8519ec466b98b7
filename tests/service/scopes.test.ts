import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { CapabilityAuthError, svcErrorInfo, SvcInternalError } from '../../src/core/errors.ts';
import type { VerifiedIdentity } from '../../src/core/identity.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { createAbilityTarget } from '../../src/service/ability-target.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { missingScopes, registerHandlerIdentity, requireScopes } from '../../src/service/scopes.ts';
import { callContextWith, identityWith, rejectsWithInfo } from '../support/ability-fixtures.ts';

test('missingScopes matches exactly and case-sensitively, keeping order without repeats', () => {
  assert.deepEqual(missingScopes(['a', 'b'], ['a', 'b']), []);
  assert.deepEqual(missingScopes(['a'], ['b', 'a', 'c', 'b']), ['b', 'c']);
  assert.deepEqual(missingScopes([], []), []);
});

test('CLM-10 missingScopes grants nothing through wildcards, case, whitespace or prefixes', () => {
  for (const granted of [['*'], ['svc-a.*'], ['SVC-A.WRITE'], ['svc-a.write '], ['svc-a.writ']]) {
    assert.deepEqual(missingScopes(granted, ['svc-a.write']), ['svc-a.write'], String(granted));
  }
});

test('requireScopes returns the identity of the call the handler was created for', () => {
  const handler = {};
  const identity = identityWith(['svc-a.read']);
  registerHandlerIdentity(handler, identity);
  assert.equal(requireScopes(handler), identity);
  assert.equal(requireScopes(handler, 'svc-a.read'), identity);
});

test('requireScopes refuses a missing scope with 403 missing_scope', () => {
  const handler = {};
  registerHandlerIdentity(handler, identityWith(['svc-a.read']));
  assert.throws(
    () => requireScopes(handler, 'svc-a.read', 'svc-a.admin'),
    (error) => {
      assert.ok(error instanceof CapabilityAuthError);
      assert.deepEqual(svcErrorInfo(error), {
        code: 'capability_auth',
        status: 403,
        retryable: false,
        reason: 'missing_scope',
      });
      assert.match(error.message, /svc-a\.admin/);
      return true;
    },
  );
});

test('requireScopes refuses an object the wrapper did not create', () => {
  for (const value of [{}, [], () => {}, null, 'text']) {
    assert.throws(() => requireScopes(value as object), (error) => {
      assert.ok(error instanceof SvcInternalError);
      assert.equal(svcErrorInfo(error).reason, 'unknown_handler');
      return true;
    });
  }
});

test('requireScopes refuses a handler object returned for more than one call', () => {
  const shared = {};
  registerHandlerIdentity(shared, identityWith(['svc-a.read']));
  registerHandlerIdentity(shared, identityWith(['svc-a.admin']));
  assert.throws(() => requireScopes(shared), (error) => {
    assert.equal(svcErrorInfo(error).reason, 'shared_handler');
    return true;
  });
});

test('inside a method, requireScopes(this) sees the caller of that call', async () => {
  const seen: VerifiedIdentity[] = [];
  const ability = defineAbility({
    id: 'svc-a.audit',
    methods: {
      read: abilityMethod({ input: z.object({}), output: z.object({ by: z.string() }) }),
      purge: abilityMethod({ input: z.object({}), output: z.object({}) }),
    },
    handler: () => ({
      read() {
        const identity = requireScopes(this, 'svc-a.read');
        seen.push(identity);
        return { by: identity.serviceId };
      },
      purge() {
        requireScopes(this, 'svc-a.purge');
        return {};
      },
    }),
  });
  const identity = identityWith(['svc-a.read']);
  const target = createAbilityTarget(ability, callContextWith({ identity }).call);
  assert.deepEqual(await target.read({}), { by: 'svc-caller' });
  // The wrapper registers the frozen copy it hands to the factory, not the object passed in.
  assert.deepEqual(seen[0], identity);
  assert.ok(Object.isFrozen(seen[0]));
  await rejectsWithInfo(target.purge({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'missing_scope',
  });
});

test('a singleton handler object makes requireScopes refuse rather than guess the caller', async () => {
  const singleton = {
    who() {
      return { id: requireScopes(this).serviceId };
    },
  };
  const ability = defineAbility({
    id: 'svc-a.single',
    methods: { who: abilityMethod({ input: z.object({}), output: z.object({ id: z.string() }) }) },
    handler: () => singleton,
  });
  const target = createAbilityTarget(ability, callContextWith().call);
  assert.deepEqual(await target.who({}), { id: 'svc-caller' });
  await rejectsWithInfo(target.who({}), { code: 'internal', reason: 'shared_handler' });
});
