// One frozen identity per verified token, shared by every HTTP batch presenting it: what the
// sharing must never change. Each batch is a raw Cap'n Web batch, as a hostile caller would send
// it; expiry, access class and scopes are still decided on every batch, and nothing a handler does
// to the identity it holds reaches another batch.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newHttpBatchRpcSession } from 'capnweb';
import { z } from 'zod';
import { CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS } from '../../src/core/capability-token.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';
import type { VerifiedIdentity } from '../../src/core/identity.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService, type SvcService } from '../../src/service/service.ts';
import { createTestTokenIssuer } from '../../src/testing/mod.ts';

const SERVICE_ID = 'ledger';
const anyObject = z.object({}).passthrough();

/** A service whose handlers record each identity they get and try to widen it. */
async function ledgerService() {
  const tokens = await createTestTokenIssuer();
  const seen: VerifiedIdentity[] = [];
  let factories = 0;
  const handler = (input: { identity: VerifiedIdentity }) => {
    factories++;
    return {
      read() {
        seen.push(input.identity);
        // A handler that tries to grant its caller more: every attempt must fail.
        const attempts = [
          () => (input.identity.scopes as string[]).push('ledger.write'),
          () => Object.assign(input.identity, { scopes: ['ledger.write'] }),
          () => Object.assign(input.identity, { callerAccess: 'service' }),
        ];
        let widened = 0;
        for (const attempt of attempts) {
          try {
            attempt();
            widened++;
          } catch {
            // Refused: the identity is frozen.
          }
        }
        return { widened, scopes: [...input.identity.scopes] };
      },
      write: () => ({ written: true }),
    };
  };
  const books = defineAbility({
    id: 'ledger.books',
    exposure: 'published',
    rpc: { transports: ['http-batch'] },
    methods: {
      read: abilityMethod({ input: anyObject, output: anyObject, scopes: ['ledger.read'] }),
      write: abilityMethod({ input: anyObject, output: anyObject, scopes: ['ledger.write'] }),
    },
    handler,
  });
  const internal = defineAbility({
    id: 'ledger.internal',
    exposure: 'published',
    access: 'service',
    rpc: { transports: ['http-batch'] },
    methods: {
      read: abilityMethod({ input: anyObject, output: anyObject, scopes: ['ledger.read'] }),
    },
    handler,
  });
  const service = createService({
    id: SERVICE_ID,
    title: 'Ledger',
    version: '1.0.0',
    auth: tokens.auth,
    abilities: [books, internal],
    logger: false,
  });
  return { service, tokens, seen, factories: () => factories };
}

/** One raw batch: `authenticate(token)` then `method({})` pipelined on it. */
async function rawBatch(
  service: SvcService,
  abilityId: string,
  token: string,
  method: string,
): Promise<unknown> {
  const original = globalThis.fetch;
  globalThis.fetch =
    ((input: RequestInfo | URL, init?: RequestInit) =>
      service.fetch(new Request(input, init))) as typeof fetch;
  try {
    // deno-lint-ignore no-explicit-any
    const main: any = newHttpBatchRpcSession(`https://ledger.test/rpc/${abilityId}`);
    try {
      return await main.authenticate(token)[method]({});
    } finally {
      main[Symbol.dispose]();
    }
  } finally {
    globalThis.fetch = original;
  }
}

async function refusal(promise: Promise<unknown>) {
  const error = await promise.then(() => assert.fail('accepted'), (caught: unknown) => caught);
  const { status, reason, code } = svcErrorInfo(error);
  return { status, reason, code };
}

test('a token accepted on earlier batches is refused once it expires: the clock is read per batch', async () => {
  const { service, tokens, factories } = await ledgerService();
  const token = await tokens.token({ aud: SERVICE_ID, scopes: ['ledger.read'], ttlSeconds: 60 });
  for (let i = 0; i < 3; i++) await rawBatch(service, 'ledger.books', token, 'read');
  assert.equal(factories(), 3);
  const realNow = Date.now;
  const pastExpiry = realNow() + (60 + CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS + 1) * 1000;
  Date.now = () => pastExpiry;
  try {
    assert.deepEqual(await refusal(rawBatch(service, 'ledger.books', token, 'read')), {
      status: 401,
      reason: 'token_expired',
      code: 'capability_auth',
    });
  } finally {
    Date.now = realNow;
  }
  assert.equal(factories(), 3, 'no handler ran for the expired token');
});

test('a handler cannot widen the identity it shares with later batches of the same token', async () => {
  const { service, tokens, seen, factories } = await ledgerService();
  const token = await tokens.token({ aud: SERVICE_ID, scopes: ['ledger.read'], spa: 'plane' });
  const first = await rawBatch(service, 'ledger.books', token, 'read');
  assert.deepEqual(first, { widened: 0, scopes: ['ledger.read'] });
  // The next batches of the same token: still refused what was never granted.
  assert.deepEqual(await refusal(rawBatch(service, 'ledger.books', token, 'write')), {
    status: 403,
    reason: 'missing_scope',
    code: 'capability_auth',
  });
  assert.deepEqual(await refusal(rawBatch(service, 'ledger.internal', token, 'read')), {
    status: 403,
    reason: 'access_class_mismatch',
    code: 'capability_auth',
  });
  assert.equal(factories(), 1, 'no handler ran for a refused batch');
  const second = await rawBatch(service, 'ledger.books', token, 'read');
  assert.deepEqual(second, { widened: 0, scopes: ['ledger.read'] });
  assert.equal(seen[0].callerAccess, 'plane');
  assert.equal(seen[1].scopes.length, 1);
});

test('each token gets its own identity, even when the same handler saw another first', async () => {
  const { service, tokens, seen } = await ledgerService();
  const reader = await tokens.token({
    aud: SERVICE_ID,
    scopes: ['ledger.read'],
    sub: 'reader',
    spa: 'plane',
  });
  const writer = await tokens.token({
    aud: SERVICE_ID,
    scopes: ['ledger.read', 'ledger.write'],
    sub: 'writer',
    spa: 'service',
  });
  await rawBatch(service, 'ledger.books', reader, 'read');
  await rawBatch(service, 'ledger.internal', writer, 'read');
  await rawBatch(service, 'ledger.books', reader, 'read');
  assert.deepEqual(seen.map((identity) => identity.serviceId), ['reader', 'writer', 'reader']);
  assert.deepEqual(seen.map((identity) => identity.scopes.length), [1, 2, 1]);
  assert.deepEqual(await refusal(rawBatch(service, 'ledger.internal', reader, 'read')), {
    status: 403,
    reason: 'access_class_mismatch',
    code: 'capability_auth',
  });
});
