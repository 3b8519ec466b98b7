// The public RPC broker (contract: Control-plane routes `/rpc`, Streaming r1–r4, Propagated
// request metadata, Limits r3; design: Front doors, broker): mounting, the invocation middleware,
// the legs chosen per caller transport, streams proxied with flow control and cancellation,
// typed failures, deadlines, metadata on the three channels, and nothing left open.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { brokerSession } from '../../src/caller/broker-session.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';
import {
  BEARER_CALLERS,
  BROKER_URL,
  type BrokerDeployment,
  createBrokerDeployment,
  LOOPBACK,
} from './broker-fixture.ts';
import { PLANE_ID, sleep } from './plane-fixture.ts';

type EchoApi = {
  whoami(input: object): Record<string, unknown>;
  ticks(input: { n: number; size?: number }): ReadableStream<{ i: number }>;
  failShaped(input: { status: number; retryable?: boolean; reason: string }): unknown;
  failMidStream(input: { after: number }): ReadableStream<{ i: number }>;
  sleep(input: { ms: number }): { slept: number };
};

const ECHO = { abilityId: 'svc-a.echo', scopes: ['svc-a.read'] };

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return await promise.then(
    (value) => assert.fail(`expected a failure, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
}

async function readAll<T>(stream: ReadableStream<T>): Promise<T[]> {
  const items: T[] = [];
  const reader = stream.getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return items;
    items.push(next.value);
  }
}

/** Waits (bounded) until `done()` holds; fails naming `what` otherwise. */
async function eventually(
  what: string,
  done: () => boolean,
  ms = 5_000,
  everyMs = 10,
): Promise<void> {
  const until = Date.now() + ms;
  while (!done()) {
    if (Date.now() > until) assert.fail(`never happened: ${what}`);
    await sleep(everyMs);
  }
}

function legsOf(fx: BrokerDeployment): unknown[] {
  return fx.eventsNamed('svc.broker.connect.completed').map((event) => event.leg);
}

async function brokerPost(fx: BrokerDeployment, path: string, headers: HeadersInit = {}) {
  return await fx.plane.fetch(
    new Request(`https://plane.fixture.test${path}`, { method: 'POST', body: '', headers }),
  );
}

test('Broker mounting: rpc omitted is unmounted; rpc: {} serves /rpc; rpc: { path } serves only that path', async () => {
  const unmounted = await createBrokerDeployment({ plane: { rpc: false } });
  const none = await brokerPost(unmounted, '/rpc', { Authorization: 'Bearer t-alice' });
  assert.equal(none.status, 404);
  // The middleware never ran for an unmounted door: no caller-auth challenge.
  assert.equal(none.headers.get('WWW-Authenticate'), null);

  const fx = await createBrokerDeployment();
  const mounted = await brokerPost(fx, '/rpc', { Authorization: 'Bearer t-alice' });
  assert.equal(mounted.status, 200);
  assert.equal(mounted.headers.get('Cache-Control'), 'no-store');
  assert.match(mounted.headers.get('X-Request-Id') ?? '', /.+/);

  const moved = await createBrokerDeployment({ plane: { rpc: { path: '/broker' } } });
  assert.equal((await brokerPost(moved, '/rpc', { Authorization: 'Bearer t-alice' })).status, 404);
  const session = brokerSession<EchoApi>({
    url: 'https://plane.fixture.test/broker',
    targetServiceId: 'svc-a',
    ...ECHO,
    fetch: moved.brokerFetch('t-alice'),
  });
  try {
    const who = await session.whoami({}) as { identity: { subject: unknown } };
    assert.deepEqual(who.identity.subject, { id: 'alice', kind: 'api_key', orgId: 'org-1' });
  } finally {
    disposeAbilitySession(session);
  }
});

test('Broker invocation middleware: svcInvocation.surface is broker; its 401 is kept; no middleware answers 500 invocation_caller_missing', async () => {
  const seen: unknown[] = [];
  const fx = await createBrokerDeployment({
    plane: {
      invocationMiddleware: async (c, next) => {
        seen.push(c.get('svcInvocation' as never));
        const header = c.req.header('authorization');
        if (header !== 'Bearer t-alice') {
          return c.json({ status: 401 }, 401, { 'WWW-Authenticate': 'Bearer' });
        }
        c.set('svcCaller' as never, BEARER_CALLERS['t-alice'] as never);
        await next();
      },
    },
  });
  const refused = await brokerPost(fx, '/rpc');
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('WWW-Authenticate'), 'Bearer');
  assert.deepEqual(seen, [{ surface: 'broker', path: '/rpc' }]);
  const session = fx.brokerSession<EchoApi>('t-bob', ECHO);
  try {
    const error = await failureOf(session.whoami({}));
    assert.equal(svcErrorInfo(error).status, 401);
  } finally {
    disposeAbilitySession(session);
  }
  assert.equal(fx.rpcRequests('svc-a').length, 0);

  const bare = await createBrokerDeployment({ plane: { invocationMiddleware: false } });
  const missing = await brokerPost(bare, '/rpc', { Authorization: 'Bearer t-alice' });
  assert.equal(missing.status, 500);
  assert.equal((await missing.json()).reason, 'invocation_caller_missing');
});

test('Broker over HTTP-batch: unary calls go through an HTTP-batch leg; a streaming method fails 405 and never reaches the service', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  const session = fx.brokerSession<EchoApi>('t-alice', ECHO);
  try {
    const who = await session.whoami({}) as { identity: { audience: string } };
    assert.equal(who.identity.audience, 'svc-a');
    const error = await failureOf(session.ticks({ n: 3 }));
    assert.deepEqual(svcErrorInfo(error), {
      code: 'internal',
      status: 405,
      retryable: false,
      reason: 'stream_requires_session_transport',
    });
    assert.equal(fx.count('calls', 'svc-a.echo#ticks'), 0);
  } finally {
    disposeAbilitySession(session);
  }
  assert.deepEqual([...new Set(legsOf(fx))], ['http-batch']);
  // The leg was HTTP-batch: POSTs to the service, no socket.
  assert.ok(fx.rpcRequests('svc-a').every((record) => record.method === 'POST'));
  assert.equal(fx.sockets['svc-a'].connections.length, 0);
});

for (const endpoints of ['websocket', 'native'] as const) {
  const leg = endpoints === 'native' ? 'cloudflare-binding-rpc' : 'websocket';
  test(`Broker over WebSocket (${leg} leg): a unary call and 1 000 validated streamed items`, async () => {
    const fx = await createBrokerDeployment({ endpoints });
    const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' });
    try {
      const who = await session.whoami({}) as { identity: { subject: unknown } };
      assert.deepEqual(who.identity.subject, { id: 'alice', kind: 'api_key', orgId: 'org-1' });
      const items = await readAll(await session.ticks({ n: 1000 }));
      assert.equal(items.length, 1000);
      assert.ok(
        items.every((item, index) => JSON.stringify(item) === JSON.stringify({ i: index })),
      );
    } finally {
      disposeAbilitySession(session);
    }
    assert.deepEqual(legsOf(fx), [leg]);
  });

  test(`Broker streams (${leg} leg): a slow caller slows the producer; a cancel ends the service's stream`, async () => {
    const fx = await createBrokerDeployment({ endpoints });
    const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' });
    try {
      const reader = (await session.ticks({ n: 100_000, size: 4096 })).getReader();
      await reader.read();
      // Nobody reads: the producer stops once the flow-control windows along the path are full.
      let produced = -1;
      await eventually(
        'the producer stalled',
        () => {
          const now = fx.count('calls', 'svc-a.echo#ticks.yielded');
          const stalled = now === produced;
          produced = now;
          return stalled;
        },
        10_000,
        100,
      );
      assert.ok(produced < 10_000, `produced ${produced} items for one read`);
      await reader.cancel();
      await eventually(
        'the service stream ended',
        () => fx.count('calls', 'svc-a.echo#ticks.ended') === 1,
      );
      assert.ok(fx.count('calls', 'svc-a.echo#ticks.yielded') < 100_000);
    } finally {
      disposeAbilitySession(session);
    }
  });

  test(`Broker (${leg} leg): service failures arrive typed, unary and mid-stream`, async () => {
    const fx = await createBrokerDeployment({ endpoints });
    const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' });
    try {
      const shaped = await failureOf(
        session.failShaped({ status: 429, retryable: true, reason: 'quota' }),
      );
      assert.deepEqual(svcErrorInfo(shaped), {
        code: 'handler',
        status: 429,
        retryable: true,
        reason: 'quota',
      });
      assert.equal((shaped as Error).message, 'Quota exceeded');
      const reader = (await session.failMidStream({ after: 2 })).getReader();
      // Items still queued when the failure arrives may be dropped along with the failure (a stream's error
      // discards its queue); the failure itself always arrives, typed.
      let midStream: unknown;
      for (let read = 0; midStream === undefined; read++) {
        assert.ok(read <= 2, 'the stream ended without its failure');
        midStream = await reader.read().then(() => undefined, (error: unknown) => error);
      }
      assert.equal((midStream as Error).message, 'Svc ability handler failed: failMidStream');
      assert.equal(svcErrorInfo(midStream).status, 500);
      assert.doesNotMatch(JSON.stringify(midStream), new RegExp(fx.stats.marker));
    } finally {
      disposeAbilitySession(session);
    }
  });

  test(`Broker (${leg} leg): closing the caller's socket closes the plane's legs`, async () => {
    const fx = await createBrokerDeployment({ endpoints });
    const sessions = [0, 1, 2].map(() =>
      fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' })
    );
    for (const session of sessions) await session.whoami({});
    // One more whose stream is still open when its caller goes away.
    const streaming = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' });
    const reader = (await streaming.ticks({ n: 100_000, size: 4096 })).getReader();
    await reader.read();
    const opened = () =>
      endpoints === 'native' ? fx.nativeSessions.opened : fx.sockets['svc-a'].connections.length;
    const open = () =>
      endpoints === 'native'
        ? fx.nativeSessions.opened - fx.nativeSessions.closed
        : fx.sockets['svc-a'].connections.filter((connection) => connection.state !== 'closed')
          .length;
    assert.equal(opened(), 4);
    for (const session of sessions) disposeAbilitySession(session);
    // The last caller's connection breaks without a closing handshake.
    fx.callerSockets('t-alice').dropAll();
    await eventually('every leg closed', () => open() === 0);
    await eventually(
      'the orphaned stream ended',
      () => fx.count('calls', 'svc-a.echo#ticks.ended') === 1,
    );
    disposeAbilitySession(streaming);
  });
}

test('Broker deadline: the caller budget travels per hop, and a budget spent by the plane fails before any service session opens', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, timeoutMs: 5_000 });
  try {
    const who = await session.whoami({}) as { remainingTimeoutMs: number };
    // Measured again at each hop: what reached the handler is less than what the caller sent.
    assert.ok(
      who.remainingTimeoutMs > 0 && who.remainingTimeoutMs < 5_000,
      String(who.remainingTimeoutMs),
    );
    const header = fx.rpcRequests('svc-a').at(-1)!.headers.get('X-Svc-Timeout');
    assert.ok(Number(header) > 0 && Number(header) <= 5_000, String(header));
  } finally {
    disposeAbilitySession(session);
  }

  fx.slowDiscovery('svc-a', 50);
  const before = fx.rpcRequests('svc-a').length;
  for (const transport of ['http-batch', 'websocket'] as const) {
    const tight = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport, timeoutMs: 20 });
    try {
      const error = await failureOf(tight.whoami({}));
      assert.equal(svcErrorInfo(error).code, 'timeout');
      assert.equal(svcErrorInfo(error).status, 504);
    } finally {
      disposeAbilitySession(tight);
    }
  }
  await sleep(100);
  assert.equal(fx.rpcRequests('svc-a').length, before);
  assert.equal(fx.sockets['svc-a'].connections.length, 0);
});

test('Broker metadata: request id, budget, idempotency key and connection info reach the service over each leg', async () => {
  for (const endpoints of ['local', 'websocket', 'native'] as const) {
    const fx = await createBrokerDeployment({ endpoints });
    const transport = endpoints === 'local' ? 'http-batch' : 'websocket';
    const session = fx.brokerSession<EchoApi>('t-alice', {
      abilityId: 'svc-b.echo',
      scopes: ['svc-b.read'],
      transport,
      timeoutMs: 30_000,
      idempotencyKey: 'order-42',
      requestId: `req-${endpoints}`,
    });
    try {
      const who = await session.whoami({}) as Record<string, unknown>;
      assert.equal(who.requestId, `req-${endpoints}`, endpoints);
      assert.equal(who.idempotencyKey, 'order-42', endpoints);
      assert.deepEqual(who.connInfo, LOOPBACK, endpoints);
      assert.ok((who.remainingTimeoutMs as number) <= 30_000, endpoints);
    } finally {
      disposeAbilitySession(session);
    }
    const record = fx.rpcRequests('svc-b').at(-1)!;
    if (endpoints === 'local') {
      assert.equal(record.headers.get('X-Request-Id'), 'req-local');
      assert.equal(record.headers.get('X-Svc-Idempotency-Key'), 'order-42');
      // The wire carries the flat remote fields.
      assert.deepEqual(JSON.parse(record.headers.get('X-Svc-Conn-Info')!), LOOPBACK.remote);
      assert.ok(Number(record.headers.get('X-Svc-Timeout')) <= 30_000);
    } else if (endpoints === 'websocket') {
      // The endpoint's createWebSocket received the final URL, metadata in its query.
      const url = new URL(fx.sockets['svc-b'].connections[0].url);
      assert.equal(url.pathname, '/rpc/svc-b.echo');
      assert.equal(url.searchParams.get('request_id'), 'req-websocket');
      assert.equal(url.searchParams.get('idempotency_key'), 'order-42');
      assert.deepEqual(JSON.parse(url.searchParams.get('conn_info')!), LOOPBACK.remote);
      assert.ok(Number(url.searchParams.get('timeout')) <= 30_000);
      assert.deepEqual(
        [...url.searchParams.keys()].sort(),
        ['conn_info', 'idempotency_key', 'request_id', 'timeout'],
      );
    } else {
      const fields = record.native!;
      assert.equal(fields.requestId, 'req-native');
      assert.equal(fields.idempotencyKey, 'order-42');
      assert.deepEqual(JSON.parse(fields.connInfo!), LOOPBACK.remote);
      assert.ok(fields.timeoutMs! > 0 && fields.timeoutMs! <= 30_000);
    }
  }
});

test('Broker events: svc.broker.connect.completed and .failed carry the request id, target and outcome', async () => {
  const fx = await createBrokerDeployment();
  const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, requestId: 'req-events-1' });
  try {
    await session.whoami({});
  } finally {
    disposeAbilitySession(session);
  }
  const [completed] = fx.eventsNamed('svc.broker.connect.completed');
  assert.equal(completed.level, 'info');
  assert.equal(completed.requestId, 'req-events-1');
  assert.equal(completed.targetServiceId, 'svc-a');
  assert.equal(completed.abilityId, 'svc-a.echo');
  assert.equal(completed.callerKind, 'user');
  assert.equal(completed.transport, 'http-batch');
  const refused = fx.brokerSession<EchoApi>('t-bob', {
    abilityId: 'svc-a.internal',
    scopes: ['svc-a.internal'],
  });
  try {
    await failureOf(refused.whoami({}));
  } finally {
    disposeAbilitySession(refused);
  }
  const [failed] = fx.eventsNamed('svc.broker.connect.failed');
  assert.equal(failed.abilityId, 'svc-a.internal');
  assert.equal(failed.status, 403);
  assert.equal(failed.reason, 'access_class_mismatch');
  // No event, and no log line, carries a token.
  assert.doesNotMatch(JSON.stringify(fx.events), /eyJ[\w-]+\.[\w-]+\.[\w-]+/);
});

test('Broker connect: a malformed request, an unknown or private ability, and ungranted scopes are refused in-batch', async () => {
  const fx = await createBrokerDeployment();
  const refusals: [string, string[], number, string][] = [
    ['svc-a.private', ['svc-a.read'], 403, 'unknown_ability'],
    ['svc-a.nothing', ['svc-a.read'], 403, 'unknown_ability'],
    ['svc-a.echo', ['svc-a.admin'], 403, 'unknown_scope'],
  ];
  for (const [abilityId, scopes, status, reason] of refusals) {
    const session = fx.brokerSession<EchoApi>('t-alice', { abilityId, scopes });
    try {
      const error = await failureOf(session.whoami({}));
      assert.equal(svcErrorInfo(error).status, status, abilityId);
      assert.equal(svcErrorInfo(error).reason, reason, abilityId);
    } finally {
      disposeAbilitySession(session);
    }
  }
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.count('calls', 'svc-a.private#secret'), 0);
  // Straight to the main object: a request that is not { targetServiceId, abilityId, scopes }.
  const { httpBatchRpc } = await import('../../src/caller/transports/http-batch.ts');
  for (
    const bad of [null, { targetServiceId: 'svc-a', abilityId: 'svc-b.echo', scopes: ['x'] }, {
      targetServiceId: 'svc-a',
      abilityId: 'svc-a.echo',
      scopes: [],
    }, { targetServiceId: 'svc-a', abilityId: 'svc-a.echo', scopes: ['svc-a.read'], token: 'x' }]
  ) {
    const opened = httpBatchRpc(fx.brokerFetch('t-alice'), { url: BROKER_URL }).open({});
    try {
      // deno-lint-ignore no-explicit-any
      const error = await failureOf((opened.main as any).connect(bad).whoami({}));
      assert.equal(svcErrorInfo(error).status, 422, JSON.stringify(bad));
      assert.equal(svcErrorInfo(error).reason, 'invalid_connect_request');
    } finally {
      opened.close();
    }
  }
  assert.equal(PLANE_ID, 'svc-plane');
});

test(
  'Broker WebSocket: a socket the middleware admitted is not cut by the 10 s authentication deadline of token sessions',
  {
    timeout: 60_000,
  },
  async () => {
    const fx = await createBrokerDeployment({ endpoints: 'websocket' });
    const session = fx.brokerSession<EchoApi>('t-alice', { ...ECHO, transport: 'websocket' });
    try {
      await session.whoami({});
      // Past WEBSOCKET_AUTHENTICATE_TIMEOUT_MS (10 s): the same socket still answers.
      await sleep(10_500);
      await session.whoami({});
      assert.equal(fx.callerSockets('t-alice').connections.length, 1);
      assert.equal(fx.callerSockets('t-alice').connections[0].state, 'open');
    } finally {
      disposeAbilitySession(session);
    }
  },
);
