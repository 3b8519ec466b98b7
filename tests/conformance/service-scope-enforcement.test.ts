// Contract: Scope enforcement. The wrapper checks method scopes before the handler runs; a
// handler may re-check with `requireScopes(this, ...)`, which also hands it the identity.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { requireScopes } from '../../src/service/scopes.ts';
import { assertRefusal, createFixture } from './fixture.ts';

const anyObject = z.record(z.string(), z.unknown());

test('Scope enforcement: method scopes are checked before the handler runs', async () => {
  const fx = await createFixture();
  using session = fx.session('svc-a.echo', { scopes: ['svc-a.read'] });
  const before = fx.count('factories', 'svc-a.echo');
  await assertRefusal(session.write({ value: 1 }), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'missing_scope',
  });
  assert.equal(fx.count('factories', 'svc-a.echo'), before);
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 0);
  // Invalid input does not get past a missing scope either: scopes come first.
  await assertRefusal(session.write(42 as never), { code: 'capability_auth', status: 403 });
  using writer = fx.session('svc-a.echo', { scopes: ['svc-a.write'] });
  assert.deepEqual(await writer.write({ value: 1 }), { written: true });
  assert.equal(fx.count('calls', 'svc-a.echo#write'), 1);
});

test('Scope enforcement: requireScopes(this, ...) returns the identity and re-checks', async () => {
  const fx = await createFixture();
  const seen: unknown[] = [];
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.checked',
      methods: {
        inspect: abilityMethod({ input: anyObject, output: anyObject }),
        admin: abilityMethod({ input: anyObject, output: anyObject }),
      },
      handler: () => ({
        inspect() {
          const identity = requireScopes(this, 'svc-c.read');
          seen.push(identity.serviceId);
          return { audience: identity.audience, scopes: identity.scopes };
        },
        admin() {
          requireScopes(this, 'svc-c.read', 'svc-c.admin');
          seen.push('admin ran');
          return {};
        },
      }),
    }),
  ]);
  using session = fx.session('svc-c.checked', {
    token: await fx.tokenFor('svc-c', ['svc-c.read']),
  });
  assert.deepEqual(await session.inspect({}), { audience: 'svc-c', scopes: ['svc-c.read'] });
  await assertRefusal(session.admin({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'missing_scope',
  });
  assert.deepEqual(seen, ['svc-caller']);
  using unscoped = fx.session('svc-c.checked', { token: await fx.tokenFor('svc-c', []) });
  await assertRefusal(unscoped.inspect({}), { code: 'capability_auth', status: 403 });
  // Outside a handler object it refuses rather than guess an identity.
  assert.throws(() => requireScopes({}, 'svc-c.read'), /not a handler object/);
});

test('Scope enforcement: a handler that mutates its identity cannot widen the scopes of later calls', async () => {
  const fx = await createFixture();
  const marker = fx.stats.marker;
  const attempts: string[] = [];
  const wrote: string[] = [];
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.notes',
      methods: {
        read: abilityMethod({ input: anyObject, output: anyObject, scopes: ['svc-c.read'] }),
        tamper: abilityMethod({ input: anyObject, output: anyObject, scopes: ['svc-c.read'] }),
        write: abilityMethod({ input: anyObject, output: anyObject, scopes: ['svc-c.write'] }),
      },
      handler: ({ identity }) => ({
        read() {
          // "Effective scopes" computed in place: the identity is frozen, so this throws.
          identity.scopes.push('svc-c.write');
          return {};
        },
        tamper() {
          // Every other way in fails too, quietly here, so the call itself succeeds.
          for (
            const attempt of [
              () => void ((identity as { scopes: string[] }).scopes = ['svc-c.write']),
              () => void Object.defineProperty(identity, 'scopes', { value: ['svc-c.write'] }),
              () => void identity.scopes.splice(0, 1, 'svc-c.write'),
              () => void identity.expiresAt.setTime(0),
            ]
          ) {
            try {
              attempt();
              attempts.push('allowed');
            } catch {
              attempts.push('refused');
            }
          }
          return { expiresAt: identity.expiresAt.getTime() };
        },
        write() {
          wrote.push('ran');
          return { leaked: marker };
        },
      }),
    }),
  ]);
  const batch = fx.httpBatch('svc-c');
  using session = fx.session('svc-c.notes', {
    token: await fx.tokenFor('svc-c', ['svc-c.read']),
    transport: batch.transport,
  });
  // One session, three calls, one batch: the calls share the session's identity.
  const [read, tamper, write] = await Promise.allSettled([
    session.read({}),
    session.tamper({}),
    session.write({}),
  ]);
  assert.equal(read.status, 'rejected');
  await assertRefusal(Promise.reject((read as PromiseRejectedResult).reason), {
    code: 'internal',
    status: 500,
    reason: 'handler_failed',
  });
  assert.equal(tamper.status, 'fulfilled');
  assert.deepEqual(attempts, ['refused', 'refused', 'refused', 'allowed']);
  // setTime reached only a copy: the identity's expiry reads as before.
  assert.ok((tamper.value as { expiresAt: number }).expiresAt > Date.now());
  await assertRefusal(Promise.reject((write as PromiseRejectedResult).reason), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'missing_scope',
  });
  assert.deepEqual(wrote, []);
  assert.equal(batch.exchanges.length, 1);
  assert.equal(batch.exchanges[0].body.includes(marker), false, batch.exchanges[0].body);
  // The refused mutation is the handler failing, and is logged as such.
  const failed = fx.events.filter((event) => event.event === 'svc.ability.handler_failed');
  assert.deepEqual(failed.map((event) => [event.method, (event.error as Error).name]), [
    ['read', 'TypeError'],
  ]);
});
