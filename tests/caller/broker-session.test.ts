// brokerSession's own rules, against a stand-in broker main object: options refused at creation,
// `connect` pipelined with the first call (one batch), the session disposable like any other.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcTarget } from 'capnweb';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { brokerSession } from '../../src/caller/broker-session.ts';
import { SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { serveRpc } from '../../src/service/rpc-serve.ts';

class Echo extends RpcTarget {
  echo(input: { value: string }) {
    return input;
  }
}

/** A broker stand-in: records each connect request and the request headers of each batch. */
function standInBroker() {
  const connects: unknown[] = [];
  const headers: Headers[] = [];
  class Main extends RpcTarget {
    connect(request: unknown) {
      connects.push(request);
      return new Echo();
    }
  }
  const fetch = (request: Request) => {
    headers.push(request.headers);
    return serveRpc(request, { transports: ['http-batch'], createMain: () => new Main() });
  };
  return { connects, headers, fetch };
}

const BASE = {
  url: 'https://plane.test/rpc',
  targetServiceId: 'notes',
  abilityId: 'notes.store',
  scopes: ['notes.read'],
};

test('brokerSession: connect is pipelined with the first call, in one batch, carrying the metadata', async () => {
  const broker = standInBroker();
  const session = brokerSession<{ echo(input: { value: string }): { value: string } }>({
    ...BASE,
    fetch: broker.fetch,
    requestId: 'req-broker-1',
    idempotencyKey: 'k-1',
    timeoutMs: 5_000,
  });
  try {
    assert.deepEqual(await session.echo({ value: 'a' }), { value: 'a' });
    assert.deepEqual(broker.connects, [{
      targetServiceId: 'notes',
      abilityId: 'notes.store',
      scopes: ['notes.read'],
    }]);
    assert.equal(broker.headers.length, 1);
    assert.equal(broker.headers[0].get('X-Request-Id'), 'req-broker-1');
    assert.equal(broker.headers[0].get('X-Svc-Idempotency-Key'), 'k-1');
    assert.ok(Number(broker.headers[0].get('X-Svc-Timeout')) <= 5_000);
    // No token of any kind leaves the caller: the broker holds them.
    assert.equal(broker.headers[0].get('Authorization'), null);
  } finally {
    disposeAbilitySession(session);
  }
  const error = await session.echo({ value: 'b' }).then(() => assert.fail('served'), (e) => e);
  assert.equal(svcErrorInfo(error).reason, 'session_disposed');
});

test('brokerSession: invalid options are refused at creation', () => {
  const broker = standInBroker();
  for (
    const bad of [
      { scopes: [] },
      { abilityId: 'other.store' },
      { transport: 'smoke' },
      { transport: 'websocket', fetch: broker.fetch },
      { createWebSocket: () => ({}) as WebSocket },
      { token: 'x' },
    ]
  ) {
    assert.throws(
      () => brokerSession({ ...BASE, fetch: broker.fetch, ...bad } as never),
      SvcConfigurationError,
      JSON.stringify(Object.keys(bad)),
    );
  }
});
