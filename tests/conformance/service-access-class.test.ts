// Contract: Access class enforcement, service side (r2). The service compares the token's `spa`
// with the ability's `access` and refuses a mismatch with 403 before the handler is created,
// on every transport.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { assertRefusal, createFixture } from './fixture.ts';

const MISMATCH = {
  code: 'capability_auth',
  status: 403,
  retryable: false,
  reason: 'access_class_mismatch',
} as const;

test('Access class r2: spa plane at a service-only ability is refused 403 before the handler exists', async () => {
  const fx = await createFixture();
  let factories = 0;
  fx.deploy('svc-c', [
    defineAbility({
      id: 'svc-c.internal',
      access: 'service',
      rpc: { transports: ['http-batch', 'websocket'] },
      methods: {
        whoami: abilityMethod({
          input: z.object({}),
          output: z.object({ callerAccess: z.string() }),
        }),
      },
      handler: ({ identity }) => {
        factories++;
        return { whoami: () => ({ callerAccess: identity.callerAccess }) };
      },
    }),
  ]);
  const token = await fx.tokenFor('svc-c', [], { spa: 'plane' });
  using batch = fx.session('svc-c.internal', { token });
  await assertRefusal(batch.whoami({}), MISMATCH);
  const socket = fx.webSocket('svc-c.internal');
  using overSocket = fx.session('svc-c.internal', { token, transport: socket.transport });
  await assertRefusal(overSocket.whoami({}), MISMATCH);
  assert.equal(factories, 0);
  using admitted = fx.session('svc-c.internal', { token: await fx.tokenFor('svc-c', []) });
  assert.deepEqual(await admitted.whoami({}), { callerAccess: 'service' });
  assert.equal(factories, 1);
});

test('Access class r2: a token without spa reads as plane and is refused the same way', async () => {
  const fx = await createFixture();
  const claims = fx.baselineClaims({ scp: ['svc-a.internal'] });
  delete claims.spa;
  using session = fx.session('svc-a.internal', { token: await fx.forgeToken(claims) });
  await assertRefusal(session.whoami({}), MISMATCH);
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('Access class r2: the check runs before scopes, and the service class passes it', async () => {
  const fx = await createFixture();
  // No scope at all, plane class: the access refusal is what the caller learns.
  const planeToken = await fx.tokenFor('svc-a', [], { spa: 'plane' });
  using plane = fx.session('svc-a.internal', { token: planeToken });
  await assertRefusal(plane.whoami({}), MISMATCH);
  // Service class without the ability's scope: past the access check, refused on scope.
  using unscoped = fx.session('svc-a.internal', { token: await fx.tokenFor('svc-a', []) });
  await assertRefusal(unscoped.whoami({}), {
    code: 'capability_auth',
    status: 403,
    reason: 'missing_scope',
  });
  using admitted = fx.session('svc-a.internal', { scopes: ['svc-a.internal'] });
  const report = (await admitted.whoami({})) as { identity: { callerAccess: string } };
  assert.equal(report.identity.callerAccess, 'service');
  assert.equal(fx.count('factories', 'svc-a.internal'), 1);
});

test('Access class r2: plane-class abilities serve both classes', async () => {
  const fx = await createFixture();
  for (const spa of ['plane', 'service']) {
    using session = fx.session('svc-a.echo', {
      token: await fx.tokenFor('svc-a', ['svc-a.read'], { spa }),
    });
    const report = (await session.whoami({})) as { identity: { callerAccess: string } };
    assert.equal(report.identity.callerAccess, spa);
  }
});
