// Security checklist A1, end to end: raw Cap'n Web batches against svc-a's real RPC route.
// `authenticate` travels on import 0 and the method is pipelined on its result, exactly as a
// hostile client would write them with the stock Cap'n Web client.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newHttpBatchRpcSession } from 'capnweb';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { createFixture, type Fixture } from './fixture.ts';

const RPC_URL = 'https://svc-a.fixture.test/rpc/svc-a.echo';

// deno-lint-ignore no-explicit-any
type RawMain = any;

/**
 * Runs `send` with the global `fetch` routed to svc-a's in-process `fetch`: the stock batch
 * client has no fetch option, and the batch must reach the real service route.
 */
async function withRawBatch<T>(fx: Fixture, send: (main: RawMain) => Promise<T>): Promise<T> {
  const original = globalThis.fetch;
  const serviceFetch = fx.serviceFetch('svc-a');
  globalThis.fetch =
    ((input: RequestInfo | URL, init?: RequestInit) =>
      serviceFetch(new Request(input, init))) as typeof fetch;
  try {
    return await send(newHttpBatchRpcSession(RPC_URL));
  } finally {
    globalThis.fetch = original;
  }
}

async function validToken(fx: Fixture): Promise<string> {
  const issued = await fx.plane.issueCapabilityToken({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    callerAccess: 'service',
  });
  return issued.token;
}

function settle<T>(promise: Promise<T>) {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

test('TOK-14 whoami pipelined on the main object (import 0) is refused, no handler', async () => {
  const fx = await createFixture();
  const outcome = await withRawBatch(fx, (main) => settle(main.whoami({})));
  assert.equal(outcome.ok, false);
  // The main object has only `authenticate`; there is nothing else to reach on it.
  assert.ok(outcome.error instanceof Error);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 0);
});

test('TOK-14 whoami pipelined on a rejected authenticate is refused with 401', async () => {
  const fx = await createFixture();
  const outcome = await withRawBatch(fx, (main) => {
    const ability = main.authenticate('not-a-token');
    return Promise.all([settle(ability), settle(ability.whoami({}))]);
  });
  for (const result of outcome) {
    assert.equal(result.ok, false);
    const info = svcErrorInfo(result.error);
    assert.equal(info.code, 'capability_auth');
    assert.equal(info.status, 401);
    assert.equal(info.retryable, false);
  }
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('TOK-15 authentication belongs to the returned stub, not to the main object', async () => {
  const fx = await createFixture();
  const token = await validToken(fx);
  const [onStub, onMain] = await withRawBatch(fx, (main) => {
    const ability = main.authenticate(token);
    return Promise.all([settle(ability.whoami({})), settle(main.whoami({}))]);
  });
  assert.equal(onStub.ok, true);
  assert.equal(
    onStub.ok && (onStub.value as { identity: { serviceId: string } }).identity.serviceId,
    'svc-caller',
  );
  assert.equal(onMain.ok, false);
  // Exactly the authenticated call reached a handler.
  assert.equal(fx.count('factories', 'svc-a.echo'), 1);
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 1);
});

test('TOK-15 a failed authenticate after a valid one refuses its own stub only', async () => {
  const fx = await createFixture();
  const token = await validToken(fx);
  const [second, first] = await withRawBatch(fx, (main) => {
    const firstStub = main.authenticate(token);
    const secondStub = main.authenticate(`${token}x`);
    return Promise.all([settle(secondStub.whoami({})), settle(firstStub.whoami({}))]);
  });
  assert.equal(second.ok, false);
  const info = svcErrorInfo(second.ok ? undefined : second.error);
  assert.equal(info.code, 'capability_auth');
  assert.equal(info.status, 401);
  assert.equal(first.ok, true);
  assert.equal(fx.count('factories', 'svc-a.echo'), 1);
  assert.equal(fx.count('calls', 'svc-a.echo#whoami'), 1);
});
