import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveDeno } from '../../../src/adapters/deno.ts';
import { abilitySession, disposeAbilitySession } from '../../../src/service/ability-session.ts';
import { httpBatchRpc } from '../../../src/service/transports/http-batch.ts';
import { websocketRpc } from '../../../src/service/transports/websocket.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../../support/fake-main.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const BOUND = { timeout: 60_000 };

function sessionOver(transport: ReturnType<typeof websocketRpc>) {
  return abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: [],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    requestId: 'req-deno-ws',
  });
}

async function readAll(stream: ReadableStream<{ i: number }>): Promise<number> {
  const reader = stream.getReader();
  let expected = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return expected;
    assert.equal(value.i, expected);
    expected++;
  }
}

test(
  'serveDeno: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  async () => {
    const record = newFakeRecord();
    const server = await serveDeno(fakeRpcEndpoint(record));
    const session = sessionOver(websocketRpc(`${server.url}/rpc/fake.echo`));
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.deepEqual(await session.echo({ value: 'over a socket' }), { value: 'over a socket' });
      assert.deepEqual(await session.whoami({}), { transport: 'websocket' });
      assert.equal(await readAll(await session.ticks({ n: 10_000 })), 10_000);
      assert.equal(record.authenticated.length, 1);
      assert.equal(record.sessions[0].query.request_id, 'req-deno-ws');
    } finally {
      disposeAbilitySession(session);
      await server.close();
    }
  },
);

test(
  'serveDeno: HTTP-batch over a real socket pipelines authenticate with the call',
  BOUND,
  async () => {
    const endpoint = fakeRpcEndpoint();
    const server = await serveDeno(endpoint);
    const session = sessionOver(httpBatchRpc(`${server.url}/rpc/fake.echo`));
    try {
      assert.deepEqual(await session.echo({ value: 'batch' }), { value: 'batch' });
      assert.equal(endpoint.requests.length, 1);
    } finally {
      disposeAbilitySession(session);
      await server.close();
    }
  },
);

test('serveDeno: an upgrade to an ability without WebSocket is refused', BOUND, async () => {
  const record = newFakeRecord();
  const server = await serveDeno(fakeRpcEndpoint(record, { transports: ['http-batch'] }));
  const session = sessionOver(websocketRpc(`${server.url}/rpc/fake.echo`));
  try {
    await assert.rejects(session.echo({ value: 'refused' }));
    assert.equal(record.sessions.length, 0);
  } finally {
    disposeAbilitySession(session);
    await server.close();
  }
});
