// A service's HTTP batch leaves its session to the garbage collector only when nothing in it
// needs disposing: every output known and plain data. An output holding a target with
// `Symbol.dispose` (which only ending the session disposes) is disposed once the batch is
// answered, also when the caller never pulled the call that returned it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcTarget } from 'capnweb';
import { z } from 'zod';
import { defineAbility } from '../../src/service/ability.ts';
import { AbilityGateway } from '../../src/service/ability-gateway.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { BATCH_SESSION_DISPOSES_NOTHING } from '../../src/service/rpc-serve.ts';
import { createService } from '../../src/service/service.ts';
import { createTestTokenIssuer } from '../../src/testing/test-token-issuer.ts';

const disposed: string[] = [];

/** Holds `slowLease` until the test lets it answer: the batch is answered before it does. */
let letSlowLeaseAnswer: () => void = () => {};

class Lease extends RpcTarget {
  constructor(readonly name: string) {
    super();
  }
  [Symbol.dispose](): void {
    disposed.push(this.name);
  }
}

const ability = defineAbility({
  id: 'svc-d.leases',
  exposure: 'published',
  rpc: { transports: ['http-batch'] },
  methods: {
    plain: abilityMethod({ input: z.object({}), output: z.object({ ok: z.boolean() }) }),
    lease: abilityMethod({ input: z.object({ name: z.string() }), output: z.any() }),
    slowLease: abilityMethod({ input: z.object({ name: z.string() }), output: z.any() }),
  },
  handler: () => ({
    plain: () => ({ ok: true }),
    lease: ({ name }: { name: string }) => ({ lease: new Lease(name) }),
    slowLease: async ({ name }: { name: string }) => {
      await new Promise<void>((resolve) => (letSlowLeaseAnswer = resolve));
      return { lease: new Lease(name) };
    },
  }),
});

async function deployment() {
  const tokens = await createTestTokenIssuer();
  const service = createService({
    id: 'svc-d',
    title: 'Leases',
    version: '1',
    auth: tokens.auth,
    abilities: [ability],
    logger: false,
  });
  const token = await tokens.token({ aud: 'svc-d', scopes: [] });
  return { service, token };
}

function batch(token: string, method: string, input: unknown, pull: boolean): Request {
  const lines = [
    JSON.stringify(['push', ['pipeline', 0, ['authenticate'], [token]]]),
    JSON.stringify(['push', ['pipeline', 1, [method], [input]]]),
    ...(pull ? [JSON.stringify(['pull', 2])] : []),
  ];
  return new Request('https://svc-d.internal/rpc/svc-d.leases', {
    method: 'POST',
    body: lines.join('\n'),
  });
}

async function disposedWithin(name: string): Promise<boolean> {
  // Counted in turns, ended as soon as it is disposed: generous for a loaded machine.
  for (let turn = 0; turn < 200 && !disposed.includes(name); turn++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return disposed.includes(name);
}

test('a target an output holds is disposed once the batch is answered', async () => {
  const { service, token } = await deployment();
  const response = await service.fetch(batch(token, 'lease', { name: 'pulled' }, true));
  assert.equal(response.status, 200);
  assert.match(await response.text(), /"resolve",2/);
  assert.equal(await disposedWithin('pulled'), true);
});

test('a target from a call never pulled, answered after the batch, is disposed too', async () => {
  const { service, token } = await deployment();
  // A token verified before is accepted at once: only the call itself is still running.
  await (await service.fetch(batch(token, 'plain', {}, true))).text();
  const response = await service.fetch(batch(token, 'slowLease', { name: 'unpulled' }, false));
  assert.equal(response.status, 200);
  await response.text();
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(disposed.includes('unpulled'), false, 'its handler has not answered yet');
  letSlowLeaseAnswer();
  assert.equal(await disposedWithin('unpulled'), true);
});

test('a call pipelined on an authentication still running at the answer is disposed', async () => {
  const { service, token } = await deployment();
  // A token new to the service is verified asynchronously: the batch, pulling nothing, is
  // answered before the call pipelined on that authentication has even started.
  const response = await service.fetch(batch(token, 'lease', { name: 'after-auth' }, false));
  assert.equal(response.status, 200);
  await response.text();
  assert.equal(await disposedWithin('after-auth'), true);
});

test('a gateway whose batch outputs were all plain data says its session disposes nothing', async () => {
  const { service, token } = await deployment();
  const gateways: AbilityGateway[] = [];
  const original = AbilityGateway.prototype[BATCH_SESSION_DISPOSES_NOTHING];
  AbilityGateway.prototype[BATCH_SESSION_DISPOSES_NOTHING] = function (this: AbilityGateway) {
    gateways.push(this);
    return original.call(this);
  };
  try {
    const plain = await service.fetch(batch(token, 'plain', {}, true));
    assert.match(await plain.text(), /"ok":true/);
    const leased = await service.fetch(batch(token, 'lease', { name: 'asked' }, true));
    await leased.text();
  } finally {
    AbilityGateway.prototype[BATCH_SESSION_DISPOSES_NOTHING] = original;
  }
  assert.equal(gateways.length, 2);
  assert.equal(gateways[0][BATCH_SESSION_DISPOSES_NOTHING](), true);
  assert.equal(gateways[1][BATCH_SESSION_DISPOSES_NOTHING](), false);
  assert.equal(await disposedWithin('asked'), true);
});
