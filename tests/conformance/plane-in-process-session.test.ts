// Contract "In-process ability session options" and "In-process session": every option field of
// `plane.abilitySession`, the brokered path chosen for ingress targets, `timeoutMs` covering
// catalog resolution and issuance, and the disposal rules.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import { cloudflareServiceBinding, httpService, localService } from '../../src/plane/endpoints.ts';
import type { InProcessSessionOptions } from '../../src/plane/in-process-session.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService } from '../../src/service/service.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { testKeys } from '../support/keys.ts';
import { closedWithin } from '../support/raw-rpc-socket.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  PLANE_ID,
  type PlaneDeployment,
  sleep,
} from './plane-fixture.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';

type Report = {
  identity: Record<string, unknown>;
  connInfo: unknown;
  idempotencyKey: string | null;
  remainingTimeoutMs: number | null;
  requestId: string | null;
};

const echo = (extra: Partial<InProcessSessionOptions> = {}): InProcessSessionOptions => ({
  abilityId: 'svc-a.echo',
  targetServiceId: 'svc-a',
  scopes: ['svc-a.read'],
  ...extra,
});

const whoami = async (fx: PlaneDeployment, options: InProcessSessionOptions) => {
  using session = fx.plane.abilitySession(options);
  return await session.whoami({}) as Report;
};

const connInfo = {
  remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' },
} as const;

test('In-process session options: abilityId, targetServiceId and scopes are required', async () => {
  const fx = await createPlaneDeployment();
  const complete = echo();
  for (const field of ['abilityId', 'targetServiceId', 'scopes'] as const) {
    const { [field]: _dropped, ...missing } = complete;
    assert.throws(
      () => fx.plane.abilitySession(missing as InProcessSessionOptions),
      SvcConfigurationError,
      field,
    );
  }
  assert.equal(fx.requests.length, 0, 'nothing was resolved or sent');
});

test('In-process session options: without caller the call is plane-class under the plane id', async () => {
  const fx = await createPlaneDeployment();
  const { identity } = await whoami(fx, echo());
  assert.equal(identity.serviceId, PLANE_ID);
  assert.equal(identity.callerAccess, 'plane');
  assert.equal('subject' in identity, false);
  const { claims } = decodeJws(fx.tokensAt('svc-a')[0]);
  assert.equal(claims.sub, PLANE_ID);
  assert.equal('act' in claims, false);
});

test('In-process session options: connInfo reaches an ingress target handler only', async () => {
  const fx = await createPlaneDeployment();
  const ingress = await whoami(fx, {
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    connInfo,
  });
  assert.deepEqual(ingress.connInfo, connInfo);
  const plain = await whoami(fx, echo({ connInfo }));
  assert.equal(plain.connInfo, null, 'dropped by a service without ingress');
  for (const token of [...fx.tokensAt('svc-b'), ...fx.tokensAt('svc-a')]) {
    assert.equal(token.includes('203.0.113.7'), false);
    assert.equal(JSON.stringify(decodeJws(token).claims).includes('203.0.113.7'), false);
  }
});

test('In-process session options: idempotencyKey is forwarded; an invalid key is dropped', async () => {
  const fx = await createPlaneDeployment();
  assert.equal(
    (await whoami(fx, echo({ idempotencyKey: 'retry-2026_01=' }))).idempotencyKey,
    'retry-2026_01=',
  );
  const invalid = await whoami(fx, echo({ idempotencyKey: 'a b' }));
  assert.equal(invalid.idempotencyKey, null);
  assert.equal(invalid.identity.audience, 'svc-a', 'the call itself still succeeds');
});

test('In-process session options: requestId reaches the handler, the RPC and discovery requests', async () => {
  const fx = await createPlaneDeployment();
  const report = await whoami(fx, echo({ requestId: 'req-inproc-1' }));
  assert.equal(report.requestId, 'req-inproc-1');
  const discovery = fx.discoveryRequests('svc-a');
  assert.equal(discovery.length, 1, 'one resolution serves the access check and the mint');
  assert.equal(discovery[0].headers.get('X-Request-Id'), 'req-inproc-1');
  assert.equal(fx.rpcRequests('svc-a').at(-1)?.headers.get('X-Request-Id'), 'req-inproc-1');
});

test('In-process session options: a malformed requestId is dropped, even on a cold catalog', async () => {
  for (const requestId of ['req\nX-Injected: 1', 'a b', 'x'.repeat(201), '']) {
    // A fresh plane each time: the first call resolves the catalog with this id in hand.
    const fx = await createPlaneDeployment();
    const report = await whoami(fx, echo({ requestId }));
    assert.equal(report.identity.audience, 'svc-a', `${JSON.stringify(requestId)}: call succeeds`);
    assert.notEqual(report.requestId, requestId);
    const discovery = fx.discoveryRequests('svc-a');
    assert.equal(discovery.length, 1);
    assert.equal(discovery[0].headers.get('X-Request-Id'), null);
    assert.notEqual(fx.rpcRequests('svc-a').at(-1)?.headers.get('X-Request-Id'), requestId);
  }
});

test('In-process session options: timeoutMs bounds each call and reaches the handler', async () => {
  const fx = await createPlaneDeployment();
  const report = await whoami(fx, echo({ timeoutMs: 5000 }));
  assert.ok(report.remainingTimeoutMs! <= 5000 && report.remainingTimeoutMs! > 3000);
  using session = fx.plane.abilitySession(echo({ timeoutMs: 150 }));
  await assertRefusal(session.sleep({ ms: 1500 }), { code: 'timeout', status: 504 });
  using none = fx.plane.abilitySession(echo({ timeoutMs: 0 }));
  const before = fx.requests.length;
  await assertRefusal(none.whoami({}), { code: 'timeout', status: 504 });
  assert.equal(fx.requests.length, before, 'a zero budget fails before any request');
  for (const timeoutMs of [1.5, -1, Number.NaN, Infinity, '100']) {
    assert.throws(
      () => fx.plane.abilitySession(echo({ timeoutMs: timeoutMs as number })),
      (error: unknown) => error instanceof SvcConfigurationError && /timeoutMs/.test(error.message),
      String(timeoutMs),
    );
  }
  assert.equal(fx.requests.length, before, 'a refused budget sends nothing');
});

test('In-process session options: timeoutMs includes catalog resolution and token issuance', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  // Discovery alone outlasts the budget and its grace: the caller's wait ends first.
  fx.slowDiscovery('svc-a', 700);
  using slow = fx.plane.abilitySession(echo({ timeoutMs: 100 }));
  await assertRefusal(slow.whoami({}), { code: 'timeout', status: 504 });
  // Observed, not timed: on a busy machine the refusal may come late, but never after discovery.
  assert.ok(fx.discoveryRequests('svc-a').length >= 1, 'discovery was asked');
  assert.equal(fx.discoveryAnswers('svc-a'), 0, 'refused before discovery answered');
  // Discovery answers inside the grace, but past the budget: no service session is opened.
  fx.slowDiscovery('svc-a', 250);
  using exhausted = fx.plane.abilitySession(echo({ timeoutMs: 120 }));
  await assertRefusal(exhausted.whoami({}), { code: 'timeout', status: 504 });
  await sleep(800);
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'svc-a never received an RPC request');
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('In-process session options: timeoutMs includes token issuance, even a slow signingKeys(env)', async () => {
  const fx = await createPlaneDeployment();
  const keys = fx.keys;
  // Unbounded, the call would succeed once the keys arrive; the refusal proves the budget
  // covered issuance.
  const plane = await fx.activate(fx.replica(['k1'], {
    signingKeys: async () => {
      await sleep(600);
      return [{ kid: 'k1', secret: keys.k1.privateJwk }];
    },
  }));
  using session = plane.abilitySession(echo({ timeoutMs: 100 }));
  await assertRefusal(session.whoami({}), { code: 'timeout', status: 504 });
  await sleep(900);
  assert.equal(fx.rpcRequests('svc-a').length, 0, 'no RPC request after the budget ran out');
  assert.equal(fx.count('factories', 'svc-a.echo'), 0);
});

test('In-process session options: the plane timeout policy clamps and supplies the budget', async () => {
  const clamped = await createPlaneDeployment({ plane: { timeout: { maxMs: 2000 } } });
  const high = await whoami(clamped, echo({ timeoutMs: 60_000 }));
  assert.ok(high.remainingTimeoutMs! <= 2000 && high.remainingTimeoutMs! > 1000);
  const defaulted = await createPlaneDeployment({ plane: { timeout: { defaultMs: 3000 } } });
  const none = await whoami(defaulted, echo());
  assert.ok(none.remainingTimeoutMs! <= 3000 && none.remainingTimeoutMs! > 2000);
});

test('In-process session: an ingress target gets a brokered token automatically', async () => {
  const fx = await createPlaneDeployment();
  const brokered = await whoami(fx, {
    abilityId: 'svc-b.echo',
    targetServiceId: 'svc-b',
    scopes: ['svc-b.read'],
    caller: { id: 'alice', kind: 'user' },
  });
  assert.equal(brokered.identity.brokerServiceId, PLANE_ID);
  assert.equal(decodeJws(fx.tokensAt('svc-b')[0]).claims.spb, PLANE_ID);
  const plain = await whoami(fx, echo());
  assert.equal('brokerServiceId' in plain.identity, false);
  assert.equal('spb' in decodeJws(fx.tokensAt('svc-a')[0]).claims, false);
});

test('In-process session: an ingress target gets a brokered token for a service caller and without a caller', async () => {
  const fx = await createPlaneDeployment();
  const ingress = { abilityId: 'svc-b.echo', targetServiceId: 'svc-b', scopes: ['svc-b.read'] };
  const service = await whoami(fx, { ...ingress, caller: { id: 'svc-robot', kind: 'service' } });
  assert.equal(service.identity.callerAccess, 'service');
  assert.equal(service.identity.serviceId, 'svc-robot');
  assert.equal(service.identity.brokerServiceId, PLANE_ID);
  const none = await whoami(fx, ingress);
  assert.equal(none.identity.callerAccess, 'plane');
  assert.equal(none.identity.brokerServiceId, PLANE_ID);
  assert.equal('subject' in none.identity, false);
  const claims = fx.tokensAt('svc-b').map((token) => decodeJws(token).claims);
  assert.deepEqual(claims.map(({ spa, spb }) => ({ spa, spb })), [
    { spa: 'service', spb: PLANE_ID },
    { spa: 'plane', spb: PLANE_ID },
  ]);
});

test('In-process session: disposal is idempotent and reuse fails consistently', async () => {
  const fx = await createPlaneDeployment();
  const session = fx.plane.abilitySession(echo());
  await session.whoami({});
  const pending = session.sleep({ ms: 400 });
  session[Symbol.dispose]();
  await assertRefusal(pending, { code: 'internal', reason: 'session_disposed' });
  session[Symbol.dispose]();
  disposeAbilitySession(session);
  const sent = fx.rpcRequests('svc-a').length;
  const first = await assertRefusal(session.whoami({}), { reason: 'session_disposed' });
  const second = await assertRefusal(session.ping({}), { reason: 'session_disposed' });
  assert.equal(first.message, second.message);
  assert.equal(fx.rpcRequests('svc-a').length, sent, 'nothing is sent after disposal');
  let scoped: typeof session | undefined;
  {
    using inBlock = fx.plane.abilitySession(echo());
    scoped = inBlock;
    await inBlock.whoami({});
  }
  await assertRefusal(scoped.whoami({}), { reason: 'session_disposed' });
});

test('In-process session: scopes, target and ability are checked against catalog and grants', async () => {
  const fx = await createPlaneDeployment();
  const cases: [Partial<InProcessSessionOptions>, string][] = [
    [{ scopes: ['svc-a.nope'] }, 'unknown_scope'],
    [{ targetServiceId: 'svc-zz', abilityId: 'svc-zz.echo' }, 'unknown_target'],
    [{ abilityId: 'svc-a.missing' }, 'unknown_ability'],
    [{ scopes: ['svc-a.read'], caller: { id: 'svc-stranger', kind: 'service' } }, 'grant_denied'],
  ];
  for (const [extra, reason] of cases) {
    using session = fx.plane.abilitySession(echo(extra));
    await assertRefusal(session.whoami({}), { code: 'capability_auth', status: 403, reason });
  }
  // An ability of another service is known to be wrong before any catalog lookup.
  assert.throws(
    () => fx.plane.abilitySession(echo({ abilityId: 'svc-c.echo' })),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'ability_target_mismatch',
  );
  assert.equal(fx.rpcRequests('svc-a').length, 0);
});

// Transport selection: the ability's `rpc.transports` decides, HTTP-batch first.

const pingMethods = {
  ping: abilityMethod({
    input: z.object({}),
    output: z.object({ ok: z.boolean() }),
    scopes: ['svc-w.read'],
  }),
};

const tickMethod = abilityMethod({
  input: z.object({ n: z.number().int().min(0).max(10) }),
  output: z.object({ i: z.number() }),
  scopes: ['svc-w.read'],
  stream: true,
});

type ServiceFetch = (request: Request, env?: unknown) => Promise<Response>;
type EndpointKind = 'http' | 'http-without-sockets' | 'binding-without-sockets' | 'local';

/**
 * A plane with one service `svc-w` whose ability `svc-w.live` is served over `transports`,
 * reached through an endpoint of `kind` (`http` dials WebSockets in memory). Records the RPC
 * requests the service receives, the sockets dialled, and how many tokens were minted.
 */
async function transportDeployment(
  transports: ('http-batch' | 'websocket')[],
  kind: EndpointKind,
  plane: { timeout?: { defaultMs?: number } } = {},
  streams = false,
) {
  const keys = await testKeys();
  const ability = streams
    ? defineAbility({
      id: 'svc-w.live',
      rpc: { transports },
      methods: { ...pingMethods, ticks: tickMethod },
      handler: () => ({
        ping: () => ({ ok: true }),
        ticks: async function* ({ n }: { n: number }) {
          for (let i = 0; i < n; i++) yield { i };
        },
      }),
    })
    : defineAbility({
      id: 'svc-w.live',
      rpc: { transports },
      methods: pingMethods,
      handler: () => ({ ping: () => ({ ok: true }) }),
    });
  const rpcRequests: Request[] = [];
  // Filled in once the plane's JWKS exists: the service verifies the plane's tokens.
  const served: { service?: { fetch: ServiceFetch } } = {};
  const serviceFetch: ServiceFetch = (request, env) => {
    if (new URL(request.url).pathname.startsWith('/rpc/')) rpcRequests.push(request);
    return served.service!.fetch(request, env);
  };
  const sockets = memoryWebSocketFactory(serviceFetch);
  const grants = [{ caller: PLANE_ID, scopes: ['svc-w.read'] }];
  const endpoints = {
    'http': () =>
      httpService({
        id: 'svc-w',
        url: 'https://svc-w.test',
        grants,
        fetch: (request) => serviceFetch(request),
        createWebSocket: sockets.createWebSocket,
      }),
    'http-without-sockets': () =>
      httpService({ id: 'svc-w', url: 'https://svc-w.test', grants, fetch: serviceFetch }),
    'binding-without-sockets': () =>
      cloudflareServiceBinding({ id: 'svc-w', grants, binding: { fetch: serviceFetch } }),
    'local': () => localService({ id: 'svc-w', grants, service: fetchOnlyService(serviceFetch) }),
  };
  let mints = 0;
  const controlPlane = createControlPlane({
    id: PLANE_ID,
    signingKeys: () => {
      mints++;
      return [keys.k1.entry];
    },
    log: false,
    services: [endpoints[kind]()],
    ...plane,
  });
  served.service = createService({
    id: 'svc-w',
    title: 'W',
    version: '1.0.0',
    auth: { jwks: { keys: (await controlPlane.jwks()).keys }, issuer: PLANE_ID },
    abilities: [ability],
    logger: false,
  });
  mints = 0; // the JWKS read above is not a mint
  const session = (options: { timeoutMs?: number } = {}) =>
    controlPlane.abilitySession<{
      ping(input: object): { ok: boolean };
      ticks(input: { n: number }): ReadableStream<{ i: number }>;
    }>({
      abilityId: 'svc-w.live',
      targetServiceId: 'svc-w',
      scopes: ['svc-w.read'],
      ...options,
    });
  return { session, sockets, rpcRequests, mints: () => mints };
}

test('In-process session transport selection: a WebSocket-only ability is called over one WebSocket', async () => {
  const fx = await transportDeployment(['websocket'], 'http');
  const session = fx.session();
  assert.deepEqual(await session.ping({}), { ok: true });
  assert.deepEqual(await session.ping({}), { ok: true });
  assert.equal(fx.sockets.connections.length, 1, 'one long-lived socket carries every call');
  assert.equal(new URL(fx.sockets.connections[0].url).pathname, '/rpc/svc-w.live');
  assert.equal(fx.rpcRequests.filter((request) => request.method === 'POST').length, 0);
  disposeAbilitySession(session);
  assert.equal(fx.sockets.connections[0].state, 'closing', 'disposal closes the socket');
  await assertRefusal(session.ping({}), { code: 'internal', reason: 'session_disposed' });
  assert.equal(await closedWithin(fx.sockets.connections[0], 5_000), 1000);
  assert.equal(fx.sockets.connections.length, 1, 'nothing is dialled after disposal');
});

test('In-process session transport selection: HTTP-batch is used whenever the ability offers it', async () => {
  const fx = await transportDeployment(['websocket', 'http-batch'], 'http');
  using session = fx.session();
  assert.deepEqual(await session.ping({}), { ok: true });
  assert.deepEqual(fx.sockets.connections, [], 'no socket dialled');
  assert.equal(fx.rpcRequests.length, 1);
  assert.equal(fx.rpcRequests[0].method, 'POST');
});

test('In-process session transport selection: an ability with streaming methods goes over WebSocket when the endpoint can dial it', async () => {
  const fx = await transportDeployment(['http-batch', 'websocket'], 'http', {}, true);
  using session = fx.session();
  const items: { i: number }[] = [];
  for await (const item of await session.ticks({ n: 3 })) items.push(item);
  assert.deepEqual(items, [{ i: 0 }, { i: 1 }, { i: 2 }]);
  assert.deepEqual(await session.ping({}), { ok: true }, 'unary calls share the socket');
  assert.equal(fx.sockets.connections.length, 1);
  assert.equal(fx.rpcRequests.filter((request) => request.method === 'POST').length, 0);
  // An endpoint that cannot dial a socket falls back to HTTP-batch: unary calls work, and a
  // stream is refused there with 405, as the contract says.
  const batchOnly = await transportDeployment(['http-batch', 'websocket'], 'local', {}, true);
  using fallback = batchOnly.session();
  assert.deepEqual(await fallback.ping({}), { ok: true });
  await assertRefusal(fallback.ticks({ n: 1 }), { status: 405 });
});

test('In-process session transport selection: over WebSocket the plane default budget bounds calls, not the socket', async () => {
  const defaulted = await transportDeployment(['websocket'], 'http', {
    timeout: { defaultMs: 3000 },
  });
  using session = defaulted.session();
  assert.deepEqual(await session.ping({}), { ok: true });
  const url = new URL(defaulted.sockets.connections[0].url);
  assert.equal(url.searchParams.get('timeout'), null, 'the default stays off the socket');
  const explicit = await transportDeployment(['websocket'], 'http');
  using bounded = explicit.session({ timeoutMs: 5000 });
  assert.deepEqual(await bounded.ping({}), { ok: true });
  const sent = Number(new URL(explicit.sockets.connections[0].url).searchParams.get('timeout'));
  assert.ok(sent > 0 && sent <= 5000, `the caller's own budget is sent (${sent})`);
});

test('In-process session transport selection: a WebSocket-only ability the endpoint cannot dial is refused before minting', async () => {
  const kinds: EndpointKind[] = ['local', 'binding-without-sockets'];
  if (typeof (globalThis as { WebSocket?: unknown }).WebSocket !== 'function') {
    kinds.push('http-without-sockets');
  }
  for (const kind of kinds) {
    const fx = await transportDeployment(['websocket'], kind);
    using session = fx.session();
    const error = await assertRefusal(session.ping({}), {
      code: 'internal',
      status: 500,
      retryable: false,
      reason: 'rpc_transport_unavailable',
    });
    assert.ok(error instanceof SvcConfigurationError, kind);
    assert.match(error.message, /svc-w\.live is served over websocket/, kind);
    assert.equal(fx.mints(), 0, `${kind}: no token was minted`);
    assert.equal(fx.rpcRequests.length, 0, `${kind}: nothing was sent`);
  }
});
