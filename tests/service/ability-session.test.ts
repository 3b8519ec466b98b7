import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcSession } from 'capnweb';
import {
  CapabilityAuthError,
  SvcConfigurationError,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
} from '../../src/core/errors.ts';
import { SVC_TIMEOUT_GRACE_MS } from '../../src/core/deadline.ts';
import {
  type AbilitySession,
  abilitySession,
  type AbilitySessionOptions,
  disposeAbilitySession,
  type ProofSigner,
  type TokenRequester,
} from '../../src/service/ability-session.ts';
import { cloudflareNativeRpc } from '../../src/service/transports/cloudflare-native.ts';
import { customRpcTransport } from '../../src/service/transports/custom.ts';
import { httpBatchRpc } from '../../src/service/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../src/service/transports/outbound-metadata.ts';
import { websocketRpc } from '../../src/service/transports/websocket.ts';
import {
  FAKE_BOUND_TOKEN,
  FAKE_TOKEN,
  FAKE_UNBOUND_JWT,
  FakeMain,
  fakeRpcEndpoint,
  newFakeRecord,
} from '../support/fake-main.ts';
import { memoryWebSocketFactory } from '../support/memory-websocket.ts';
import { MessagePortRpcTransport } from '../support/message-port-transport.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  sleep(input: { ms: number }): { slept: number };
  fail(input: Record<string, never>): never;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

/** Serves the fake main on one end of a MessageChannel. */
function serveOverPort(port: MessagePort, record: ReturnType<typeof newFakeRecord>): void {
  const main = new FakeMain(record, { transport: 'websocket', request: new Request('http://x/') });
  new RpcSession(new MessagePortRpcTransport(port), main);
}

function optionsFor(
  transport: RpcTransportFactory,
  extra: Partial<AbilitySessionOptions> = {},
): AbilitySessionOptions {
  return {
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['echo'],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    ...extra,
  };
}

/** The three transport kinds, each wired to a fresh fake service. */
function transports() {
  const batchRecord = newFakeRecord();
  const batchEndpoint = fakeRpcEndpoint(batchRecord);
  const wsRecord = newFakeRecord();
  const wsEndpoint = fakeRpcEndpoint(wsRecord);
  const sockets = memoryWebSocketFactory(wsEndpoint.fetch);
  const customRecord = newFakeRecord();
  const ports: MessagePort[] = [];
  const custom = customRpcTransport(() => {
    const channel = new MessageChannel();
    ports.push(channel.port1, channel.port2);
    serveOverPort(channel.port2, customRecord);
    return new MessagePortRpcTransport(channel.port1);
  });
  return {
    'http-batch': { transport: httpBatchRpc(batchEndpoint.fetch), record: batchRecord },
    websocket: {
      transport: websocketRpc('ws://fake.internal/rpc/fake.echo', {
        createWebSocket: sockets.createWebSocket,
      }),
      record: wsRecord,
      sockets,
    },
    custom: { transport: custom, record: customRecord, ports },
  };
}

const KINDS = ['http-batch', 'websocket', 'custom'] as const;

function closePorts(ports: MessagePort[] = []) {
  for (const port of ports) port.close();
}

for (const kind of KINDS) {
  test(`${kind}: a typed call returns the output and the session is not thenable`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      assert.deepEqual(await session.echo({ value: kind }), { value: kind });
      assert.equal(await session, session);
      assert.equal((session as unknown as Record<string, unknown>).then, undefined);
      assert.equal((session as unknown as Record<string, unknown>).toJSON, undefined);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: after disposal every call rejects with the same session_disposed error`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      assert.deepEqual(await session.echo({ value: 'before' }), { value: 'before' });
      disposeAbilitySession(session);
      disposeAbilitySession(session);
      session[Symbol.dispose]();
      const first = await session.echo({ value: 'after' }).catch((error) => error);
      const second = await session.whoami({}).catch((error) => error);
      assert.ok(first instanceof SvcInternalError);
      assert.equal(first, second);
      assert.equal(first.reason, 'session_disposed');
      assert.match(first.message, /fake\.echo/);
      assert.deepEqual(svcErrorInfo(first), {
        code: 'internal',
        status: 500,
        retryable: false,
        reason: 'session_disposed',
      });
    } finally {
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: a call pending at disposal rejects with session_disposed`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      const pending = session.sleep({ ms: 200 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      disposeAbilitySession(session);
      await assert.rejects(pending, (error: unknown) => {
        assert.equal(svcErrorInfo(error).reason, 'session_disposed');
        return true;
      });
    } finally {
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  test(`${kind}: a handler error keeps its own code, status, retryable and reason`, async () => {
    const all = transports();
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport));
    try {
      const error = await session.fail({}).catch((caught) => caught) as
        & Error
        & Record<string, unknown>;
      assert.ok(error instanceof Error);
      assert.equal(error.message, 'The fake ability failed on purpose');
      assert.deepEqual(
        {
          code: error.code,
          status: error.status,
          retryable: error.retryable,
          reason: error.reason,
        },
        { code: 'handler', status: 503, retryable: true, reason: 'fake_failure' },
      );
      assert.deepEqual(svcErrorInfo(error), {
        code: 'handler',
        status: 503,
        retryable: true,
        reason: 'fake_failure',
      });
      assert.deepEqual(await session.echo({ value: 'after failure' }), { value: 'after failure' });
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: timeoutMs 0 fails every call immediately without asking for a token`, async () => {
    const all = transports();
    let tokenRequests = 0;
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      timeoutMs: 0,
      requestToken: () => {
        tokenRequests++;
        return Promise.resolve(FAKE_TOKEN);
      },
    }));
    try {
      for (let i = 0; i < 2; i++) {
        await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
          assert.ok(error instanceof SvcTimeoutError);
          assert.equal(svcErrorInfo(error).code, 'timeout');
          return true;
        });
      }
      assert.equal(tokenRequests, 0);
      assert.equal(all[kind].record.calls.length, 0);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: the local wait is the budget plus the grace, and the session survives it`, async () => {
    const all = transports();
    const budget = 40;
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, { timeoutMs: budget }));
    try {
      const started = Date.now();
      const error = await session.sleep({ ms: budget + SVC_TIMEOUT_GRACE_MS + 300 }).catch((e) =>
        e
      );
      const waited = Date.now() - started;
      assert.ok(error instanceof SvcTimeoutError, String(error));
      assert.ok(waited >= budget + SVC_TIMEOUT_GRACE_MS - 5, `waited ${waited} ms`);
      assert.ok(waited < budget + SVC_TIMEOUT_GRACE_MS + 250, `waited ${waited} ms`);
      assert.deepEqual(await session.echo({ value: 'alive' }), { value: 'alive' });
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
      await new Promise((resolve) => setTimeout(resolve, 400));
    }
  });

  test(`${kind}: an unbound token costs no signature`, async () => {
    const all = transports();
    let proofs = 0;
    const prover: ProofSigner = () => {
      proofs++;
      return Promise.resolve('proof');
    };
    const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_UNBOUND_JWT), {
      proveTokenPossession: prover,
    });
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      requestToken: requester,
      proveTokenPossession: prover,
    }));
    try {
      await session.echo({ value: 'unbound' });
      await session.echo({ value: 'again' });
      assert.equal(proofs, 0);
      assert.equal(all[kind].record.authenticated[0].token, FAKE_UNBOUND_JWT);
      assert.equal(all[kind].record.authenticated[0].proof, undefined);
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });

  test(`${kind}: a bound token is proved once per session with the requester's prover`, async () => {
    const all = transports();
    const inputs: unknown[] = [];
    const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_BOUND_TOKEN), {
      proveTokenPossession: (input: Parameters<ProofSigner>[0]) => {
        inputs.push(input);
        return Promise.resolve('signed-proof');
      },
    });
    const session = abilitySession<FakeApi>(optionsFor(all[kind].transport, {
      requestToken: requester,
    }));
    try {
      await session.echo({ value: 'one' });
      await session.echo({ value: 'two' });
      assert.deepEqual(inputs, [{
        token: FAKE_BOUND_TOKEN,
        targetServiceId: 'fake',
        abilityId: 'fake.echo',
      }]);
      for (const seen of all[kind].record.authenticated) {
        assert.deepEqual(seen, { token: FAKE_BOUND_TOKEN, proof: 'signed-proof' });
      }
    } finally {
      disposeAbilitySession(session);
      closePorts((all.custom as { ports?: MessagePort[] }).ports);
    }
  });
}

test('an explicit proveTokenPossession wins over the requester prover', async () => {
  const all = transports();
  const used: string[] = [];
  const requester: TokenRequester = Object.assign(() => Promise.resolve(FAKE_BOUND_TOKEN), {
    proveTokenPossession: () => {
      used.push('requester');
      return Promise.resolve('requester-proof');
    },
  });
  const session = abilitySession<FakeApi>(optionsFor(all['http-batch'].transport, {
    requestToken: requester,
    proveTokenPossession: () => {
      used.push('explicit');
      return Promise.resolve('explicit-proof');
    },
  }));
  await session.echo({ value: 'x' });
  assert.deepEqual(used, ['explicit']);
  assert.equal(all['http-batch'].record.authenticated[0].proof, 'explicit-proof');
});

test('a bound token without any prover fails locally with a capability error', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => Promise.resolve(FAKE_BOUND_TOKEN),
  }));
  await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
    assert.ok(error instanceof CapabilityAuthError);
    assert.equal(svcErrorInfo(error).reason, 'proof_signer_missing');
    return true;
  });
  assert.equal(endpoint.requests.length, 0);
});

test('a refused token arrives as a capability_auth error', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => Promise.resolve('not-the-token'),
  }));
  const error = await session.echo({ value: 'x' }).catch((caught) => caught);
  assert.equal(error.code, 'capability_auth');
  assert.deepEqual(svcErrorInfo(error), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    reason: 'token_invalid',
  });
});

test('a failed token request fails the call and the next call asks again', async () => {
  const endpoint = fakeRpcEndpoint();
  let attempts = 0;
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch), {
    requestToken: () => {
      attempts++;
      return attempts === 1 ? Promise.reject(new Error('plane down')) : Promise.resolve(FAKE_TOKEN);
    },
  }));
  await assert.rejects(session.echo({ value: 'x' }), /plane down/);
  assert.deepEqual(await session.echo({ value: 'y' }), { value: 'y' });
  assert.equal(attempts, 2);
});

test('websocket: one socket per session, authenticate once, metadata in the query', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.websocket.transport, {
    requestId: 'req-ws',
    timeoutMs: 5_000,
    idempotencyKey: 'key-1',
    connInfo: '{"address":"198.51.100.7"}',
  }));
  try {
    const results = await Promise.all([session.echo({ value: 'a' }), session.whoami({})]);
    assert.deepEqual(results, [{ value: 'a' }, { transport: 'websocket' }]);
    assert.deepEqual(await session.echo({ value: 'later' }), { value: 'later' });
    assert.equal(all.websocket.sockets.urls.length, 1);
    assert.equal(all.websocket.record.authenticated.length, 1);
    const url = new URL(all.websocket.sockets.urls[0]);
    assert.equal(url.protocol, 'ws:');
    assert.equal(url.searchParams.get('request_id'), 'req-ws');
    assert.equal(url.searchParams.get('idempotency_key'), 'key-1');
    assert.equal(url.searchParams.get('conn_info'), '{"address":"198.51.100.7"}');
    const budget = Number(url.searchParams.get('timeout'));
    assert.ok(budget > 0 && budget <= 5_000);
    assert.ok(!all.websocket.sockets.urls[0].includes(FAKE_TOKEN));
    assert.equal(all.websocket.record.sessions[0].query.request_id, 'req-ws');
  } finally {
    disposeAbilitySession(session);
  }
  assert.equal(all.websocket.sockets.sockets[0].closeCode, 1000);
});

test('websocket: a streaming method delivers a ReadableStream', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.websocket.transport));
  try {
    const stream = await session.ticks({ n: 50 });
    const items: number[] = [];
    for await (const item of stream as unknown as AsyncIterable<{ i: number }>) items.push(item.i);
    assert.deepEqual(items, Array.from({ length: 50 }, (_, i) => i));
  } finally {
    disposeAbilitySession(session);
  }
});

test('custom: a MessagePort pair carries a stream', async () => {
  const all = transports();
  const session = abilitySession<FakeApi>(optionsFor(all.custom.transport));
  try {
    const reader = (await session.ticks({ n: 20 })).getReader();
    let count = 0;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      count++;
    }
    assert.equal(count, 20);
  } finally {
    disposeAbilitySession(session);
    closePorts(all.custom.ports);
  }
});

test('using disposes the session at the end of the block', async () => {
  const endpoint = fakeRpcEndpoint();
  let escaped: AbilitySession<FakeApi> | undefined;
  {
    using session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch)));
    escaped = session;
    assert.deepEqual(await session.echo({ value: 'in block' }), { value: 'in block' });
  }
  await assert.rejects(escaped.echo({ value: 'x' }), /disposed/);
});

test('Symbol.asyncDispose disposes too', async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession<FakeApi>(optionsFor(httpBatchRpc(endpoint.fetch)));
  await session[Symbol.asyncDispose]();
  await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
    return svcErrorInfo(error).reason === 'session_disposed';
  });
  assert.equal(endpoint.requests.length, 0);
});

test('a custom transport instance carries one session; a second open is refused', async () => {
  const channel = new MessageChannel();
  serveOverPort(channel.port2, newFakeRecord());
  const transport = customRpcTransport(new MessagePortRpcTransport(channel.port1));
  const first = abilitySession<FakeApi>(optionsFor(transport));
  const second = abilitySession<FakeApi>(optionsFor(transport));
  try {
    assert.deepEqual(await first.echo({ value: 'first' }), { value: 'first' });
    await assert.rejects(second.echo({ value: 'second' }), SvcConfigurationError);
  } finally {
    disposeAbilitySession(first);
    disposeAbilitySession(second);
    channel.port1.close();
    channel.port2.close();
  }
});

test('cloudflareNativeRpc refuses with a configuration error naming the alternatives', () => {
  assert.throws(() => cloudflareNativeRpc({}), (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError);
    assert.equal(
      error.message,
      'cloudflareNativeRpc is not built yet: use cloudflareServiceBindingRpc or websocketRpc',
    );
    return true;
  });
});

test('invalid session options are refused at creation', () => {
  const transport = httpBatchRpc(fakeRpcEndpoint().fetch);
  for (
    const bad of [
      { abilityId: '' },
      { timeoutMs: -1 },
      { timeoutMs: Number.NaN },
      { scopes: 'echo' as unknown as string[] },
      { transport: {} as RpcTransportFactory },
    ]
  ) {
    assert.throws(() => abilitySession(optionsFor(transport, bad)), SvcConfigurationError);
  }
});

test("names Cap'n Web stubs reserve are refused instead of silently calling the stub", async () => {
  const endpoint = fakeRpcEndpoint();
  const session = abilitySession(optionsFor(httpBatchRpc(endpoint.fetch)));
  for (const name of ['dup', 'map', 'onRpcBroken']) {
    await assert.rejects(session[name]({}), (error: unknown) => {
      assert.ok(error instanceof SvcConfigurationError);
      assert.match(error.message, new RegExp(name));
      return true;
    });
  }
  assert.equal(endpoint.requests.length, 0);
});
