// A service that refuses every token the plane issues now (its JWKS does not have the plane's
// new key yet, Rotation r9) must not turn each call into one more mint at the plane: once a
// replacement for a refused token is refused in turn, as soon as it arrived, the next is asked
// for only after RENEWAL_RETRY_MS.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcTarget } from 'capnweb';
import { CapabilityAuthError, svcErrorInfo } from '../../src/core/errors.ts';
import {
  abilitySession,
  disposeAbilitySession,
  RENEWAL_RETRY_MS,
} from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../support/fake-main.ts';
import { withMovableClocks } from '../support/wall-clock.ts';

type Echo = { echo(input: { value: string }): Promise<{ value: string }> };

/** A session whose requester hands out tokens the fake service refuses until `accept` is set. */
function refusedSession(
  transport: (fetch: (request: Request) => Promise<Response>) => RpcTransportFactory,
) {
  const state = { accept: false, requests: [] as (string | undefined)[] };
  const record = fakeRpcEndpoint(newFakeRecord());
  const session = abilitySession<Echo>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    requestToken: (request) => {
      state.requests.push(request.refusedToken);
      return Promise.resolve(state.accept ? FAKE_TOKEN : `unknown-${state.requests.length}`);
    },
    transport: transport(record.fetch),
  });
  return { session, state };
}

async function refusalOf(call: Promise<unknown>) {
  const error = await call.then(() => undefined, (caught) => caught);
  return svcErrorInfo(error);
}

const transports: [
  string,
  (fetch: (request: Request) => Promise<Response>) => RpcTransportFactory,
][] = [
  ['HTTP-batch', (fetch) => httpBatchRpc(fetch)],
  [
    'WebSocket',
    (fetch) =>
      websocketRpc('wss://fake.internal/rpc/fake.echo', {
        createWebSocket: memoryWebSocketFactory(fetch).createWebSocket,
      }),
  ],
];

for (const [name, transport] of transports) {
  test(`${name}: once a replacement token is refused too, calls share the refusal for RENEWAL_RETRY_MS instead of each asking the plane`, async () => {
    await withMovableClocks(async (moved) => {
      const { session, state } = refusedSession(transport);
      try {
        const first = await refusalOf(session.echo({ value: 'a' }));
        assert.equal(first.status, 401);
        assert.equal(first.code, 'capability_auth');
        // The first refusal is answered with a replacement at once; it is refused too.
        assert.deepEqual(await refusalOf(session.echo({ value: 'b' })), first);
        assert.deepEqual(state.requests, [undefined, 'unknown-1']);
        for (let i = 0; i < 30; i++) {
          assert.deepEqual(await refusalOf(session.echo({ value: 'c' })), first);
        }
        assert.equal(state.requests.length, 2, 'no token request per call');

        // The pause runs on the monotonic clock: the wall clock stepping back ten minutes
        // (NTP) does not stretch it. Once it has passed, the next call asks again.
        moved.wallMs -= 600_000;
        moved.monotonicMs += RENEWAL_RETRY_MS;
        state.accept = true;
        assert.deepEqual(await session.echo({ value: 'd' }), { value: 'd' });
        assert.deepEqual(state.requests, [undefined, 'unknown-1', 'unknown-2']);
      } finally {
        disposeAbilitySession(session);
      }
    });
  });
}

/** A main whose `authenticate` refuses every token, as a service whose JWKS moved on does. */
class RefusingMain extends RpcTarget {
  authenticate(): never {
    throw new CapabilityAuthError('The capability token has expired', { reason: 'token_expired' });
  }
}

test('a token refused long after it arrived (expired at the service) is replaced at once', async () => {
  await withMovableClocks(async (moved) => {
    const accepting = fakeRpcEndpoint(newFakeRecord());
    const refusing = fakeRpcEndpoint(newFakeRecord(), { createMain: () => new RefusingMain() });
    let service = accepting;
    const requests: (string | undefined)[] = [];
    const session = abilitySession<Echo>({
      abilityId: 'fake.echo',
      callerServiceId: 'caller',
      targetServiceId: 'fake',
      scopes: ['read'],
      requestToken: (request) => {
        requests.push(request.refusedToken);
        return Promise.resolve(FAKE_TOKEN);
      },
      transport: httpBatchRpc((request) => service.fetch(request)),
    });
    try {
      assert.deepEqual(await session.echo({ value: 'a' }), { value: 'a' });
      moved.monotonicMs += 2 * RENEWAL_RETRY_MS;
      moved.wallMs += 2 * RENEWAL_RETRY_MS;
      service = refusing;
      assert.equal((await refusalOf(session.echo({ value: 'b' }))).reason, 'token_expired');
      assert.equal(requests.length, 1);
      // Refused long after it arrived: the next call asks for another at once.
      assert.equal((await refusalOf(session.echo({ value: 'c' }))).reason, 'token_expired');
      assert.deepEqual(requests, [undefined, FAKE_TOKEN]);
    } finally {
      disposeAbilitySession(session);
    }
  });
});
