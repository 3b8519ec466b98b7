// Security checklist cases through the public RPC broker (`/rpc`), from the caller's side: the
// checklist's bearer callers t-alice, t-bob and t-robot reach the plane over HTTP-batch and
// WebSocket, and the services record what reached them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { brokerSession } from '../../src/caller/broker-session.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { BROKER_URL, createBrokerDeployment, LOOPBACK } from './broker-fixture.ts';
import { assertRefusal, decodeJws, PLANE_ID, sleep } from './plane-fixture.ts';

type Report = {
  identity: Record<string, unknown>;
  connInfo: unknown;
  idempotencyKey: unknown;
  requestId: unknown;
};
type WhoamiApi = {
  whoami(input: object): Report;
  failShaped(input: { status: number; reason: string }): unknown;
};

test('ACC-03 broker: t-bob connecting to svc-a.internal is refused in-batch (403) from the catalog; nothing minted, nothing sent', async () => {
  const fx = await createBrokerDeployment({ countSigningKeyLookups: true, endpoints: 'websocket' });
  for (const transport of ['http-batch', 'websocket'] as const) {
    const session = fx.brokerSession<WhoamiApi>('t-bob', {
      abilityId: 'svc-a.internal',
      scopes: ['svc-a.internal'],
      transport,
    });
    try {
      await assertRefusal(session.whoami({}), {
        code: 'capability_auth',
        status: 403,
        retryable: false,
        reason: 'access_class_mismatch',
      });
    } finally {
      disposeAbilitySession(session);
    }
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'no token was minted');
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'svc-a received no RPC request');
  assert.equal(fx.sockets['svc-a'].connections.length, 0, 'no socket was opened to svc-a');
  assert.equal(fx.count('factories', 'svc-a.internal'), 0);
});

test('ACC-06 broker: t-robot (kind service) reaches svc-a.internal; the token has spa service, sub svc-robot, no subject', async () => {
  const fx = await createBrokerDeployment();
  const session = fx.brokerSession<WhoamiApi>('t-robot', {
    abilityId: 'svc-a.internal',
    scopes: ['svc-a.internal'],
  });
  try {
    const { identity } = await session.whoami({});
    assert.equal(identity.callerAccess, 'service');
    assert.equal(identity.serviceId, 'svc-robot');
    assert.equal('subject' in identity, false);
  } finally {
    disposeAbilitySession(session);
  }
  const [token] = fx.tokensAt('svc-a');
  const { claims } = decodeJws(token);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.sub, 'svc-robot');
  for (const name of ['act', 'spk', 'spo']) assert.equal(name in claims, false, name);
  assert.equal(fx.count('calls', 'svc-a.internal#whoami'), 1);
});

test('DEL-05 broker: t-alice through /rpc to svc-a.echo.whoami is delegated (subject alice, org-1, api_key; plane-class; acting service the plane)', async () => {
  const fx = await createBrokerDeployment();
  const session = fx.brokerSession<WhoamiApi>('t-alice', {
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  try {
    const { identity } = await session.whoami({});
    assert.deepEqual(identity.subject, { id: 'alice', orgId: 'org-1', kind: 'api_key' });
    assert.equal(identity.callerAccess, 'plane');
    assert.equal(identity.serviceId, PLANE_ID);
  } finally {
    disposeAbilitySession(session);
  }
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(claims.sub, 'alice');
  assert.deepEqual(claims.act, { sub: PLANE_ID });
});

test('ING-03 broker: svc-b (ingress) through the broker gets a brokered token and the connection info, over each leg', async () => {
  for (const endpoints of ['local', 'websocket', 'native'] as const) {
    const fx = await createBrokerDeployment({ endpoints });
    const session = fx.brokerSession<WhoamiApi>('t-alice', {
      abilityId: 'svc-b.echo',
      scopes: ['svc-b.read'],
      transport: endpoints === 'local' ? 'http-batch' : 'websocket',
    });
    try {
      const report = await session.whoami({});
      assert.equal(report.identity.brokerServiceId, PLANE_ID, endpoints);
      assert.deepEqual(report.connInfo, LOOPBACK, endpoints);
    } finally {
      disposeAbilitySession(session);
    }
  }
});

test('ING-06 broker: svc-b advertises ingress and the broker picks the brokered issue path by itself', async () => {
  const fx = await createBrokerDeployment();
  const session = fx.brokerSession<WhoamiApi>('t-robot', {
    abilityId: 'svc-b.echo',
    scopes: ['svc-b.read'],
  });
  try {
    await session.whoami({});
  } finally {
    disposeAbilitySession(session);
  }
  const { claims } = decodeJws(fx.tokensAt('svc-b')[0]);
  assert.equal(claims.spb, PLANE_ID);
  assert.equal(fx.count('calls', 'svc-b.echo#whoami'), 1);
});

test('META-05 broker: the token that reached the service carries no address, port or other connection info', async () => {
  const fx = await createBrokerDeployment();
  const session = fx.brokerSession<WhoamiApi>('t-alice', {
    abilityId: 'svc-b.echo',
    scopes: ['svc-b.read'],
  });
  try {
    const report = await session.whoami({});
    // The handler did get the connection info (ingress): there was something to leak.
    assert.deepEqual(report.connInfo, LOOPBACK);
  } finally {
    disposeAbilitySession(session);
  }
  const [token] = fx.tokensAt('svc-b');
  const { header, claims } = decodeJws(token);
  const text = JSON.stringify({ header, claims });
  for (const leak of ['127.0.0.1', '50000', 'addressType', 'remote', 'conn']) {
    assert.equal(text.includes(leak), false, leak);
  }
  assert.deepEqual(
    Object.keys(claims).sort(),
    ['act', 'aud', 'exp', 'iat', 'iss', 'jti', 'nbf', 'scp', 'spa', 'spb', 'spk', 'spo', 'sub']
      .filter((name) => name in claims).sort(),
  );
});

test('META-06 broker: the request id the plane received is the one the service adopts, on both caller transports', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  for (const transport of ['http-batch', 'websocket'] as const) {
    const session = fx.brokerSession<WhoamiApi>('t-alice', {
      abilityId: 'svc-a.echo',
      scopes: ['svc-a.read'],
      transport,
      requestId: `req-meta-06-${transport}`,
    });
    try {
      const report = await session.whoami({});
      assert.equal(report.requestId, `req-meta-06-${transport}`);
    } finally {
      disposeAbilitySession(session);
    }
  }
});

test('META-06 broker: a hostile request_id on the broker socket is not adopted and injects nothing', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  const hostile = 'x\r\nSet-Cookie: x=1';
  const sockets = fx.callerSockets('t-alice');
  const session = brokerSession<WhoamiApi>({
    url: BROKER_URL,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
    transport: 'websocket',
    createWebSocket: (url) => {
      const final = new URL(url);
      final.searchParams.set('request_id', hostile);
      return sockets.createWebSocket(final.href);
    },
  });
  try {
    const report = await session.whoami({});
    assert.equal(typeof report.requestId, 'string');
    assert.doesNotMatch(String(report.requestId), /[\r\n]|Set-Cookie/);
  } finally {
    disposeAbilitySession(session);
  }
  const upgrade = await sockets.connections.at(-1)!.response;
  assert.equal(upgrade.headers.get('Set-Cookie'), null);
  assert.doesNotMatch(upgrade.headers.get('X-Request-Id') ?? '', /[\r\n]/);
  const leg = new URL(fx.sockets['svc-a'].connections[0].url);
  assert.doesNotMatch(leg.searchParams.get('request_id') ?? '', /[\r\n]|Set-Cookie/);
});

test('DL-06 broker: with X-Svc-Timeout 1 and a plane that takes longer, the call times out before any service session opens', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  fx.slowDiscovery('svc-a', 30);
  for (const transport of ['http-batch', 'websocket'] as const) {
    const session = fx.brokerSession<WhoamiApi>('t-alice', {
      abilityId: 'svc-a.echo',
      scopes: ['svc-a.read'],
      transport,
      timeoutMs: 1,
    });
    try {
      const error = await session.whoami({}).then(() => assert.fail('served'), (e: unknown) => e);
      assert.equal(svcErrorInfo(error).code, 'timeout', transport);
      assert.equal(svcErrorInfo(error).status, 504, transport);
    } finally {
      disposeAbilitySession(session);
    }
  }
  // Let anything the broker might still do finish: the service saw no RPC request, no socket.
  await sleep(100);
  assert.equal(fx.rpcRequests('svc-a').length, 0);
  assert.equal(fx.sockets['svc-a'].connections.length, 0);
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('IDEM-04 broker: only a valid idempotency key reaches the service, over HTTP-batch headers, WebSocket query and native fields', async () => {
  for (const endpoints of ['local', 'websocket', 'native'] as const) {
    const fx = await createBrokerDeployment({ endpoints });
    const transport = endpoints === 'local' ? 'http-batch' : 'websocket';
    for (const [key, expected] of [['pay-42_x=', 'pay-42_x='], ['bad key!', null]] as const) {
      // The caller's channel carries the key raw, as a hostile client would send it.
      const sockets = fx.callerSockets('t-alice');
      const session = brokerSession<WhoamiApi>({
        url: BROKER_URL,
        targetServiceId: 'svc-a',
        abilityId: 'svc-a.echo',
        scopes: ['svc-a.read'],
        transport,
        ...(transport === 'http-batch'
          ? {
            fetch: (request: Request) => {
              const headers = new Headers(request.headers);
              headers.set('X-Svc-Idempotency-Key', key);
              return fx.brokerFetch('t-alice')(new Request(request, { headers }));
            },
          }
          : {
            createWebSocket: (url: string) => {
              const final = new URL(url);
              final.searchParams.set('idempotency_key', key);
              return sockets.createWebSocket(final.href);
            },
          }),
      });
      try {
        const report = await session.whoami({});
        assert.equal(report.idempotencyKey, expected, `${endpoints} ${key}`);
      } finally {
        disposeAbilitySession(session);
      }
      const record = fx.rpcRequests('svc-a').at(-1);
      const sent = endpoints === 'local'
        ? record!.headers.get('X-Svc-Idempotency-Key')
        : endpoints === 'native'
        ? record!.native!.idempotencyKey ?? null
        : new URL(fx.sockets['svc-a'].connections.at(-1)!.url).searchParams.get('idempotency_key');
      assert.equal(sent, expected, `${endpoints} ${key}: what the service was sent`);
    }
  }
});

test('ERR-10 broker: a retryable 503 from an idempotent method runs once and reaches the caller as 503, retryable', async () => {
  const fx = await createBrokerDeployment({ endpoints: 'websocket' });
  for (const transport of ['http-batch', 'websocket'] as const) {
    const before = fx.count('calls', 'svc-a.echo#failShaped');
    const session = fx.brokerSession<WhoamiApi>('t-alice', {
      abilityId: 'svc-a.echo',
      scopes: ['svc-a.read'],
      transport,
    });
    try {
      await assertRefusal(session.failShaped({ status: 503, reason: 'overloaded' }), {
        code: 'handler',
        status: 503,
        retryable: true,
        reason: 'overloaded',
      });
    } finally {
      disposeAbilitySession(session);
    }
    await sleep(50);
    assert.equal(fx.count('calls', 'svc-a.echo#failShaped'), before + 1, transport);
  }
});
