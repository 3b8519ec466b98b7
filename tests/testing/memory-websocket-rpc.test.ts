// The in-memory WebSocket transport of `svcplane/testing`: sessions open through the service's
// real upgrade path, stream, survive several calls on one connection, and fail as a lost
// connection (retryable 503 rpc_connection_lost) when the test drops it on purpose.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  abilitySession,
  createControlPlane,
  disposeAbilitySession,
  generateSigningKeyEntry,
  httpService,
  SvcConfigurationError,
  svcErrorInfo,
} from '../../mod.ts';
import {
  createTestTokenIssuer,
  memoryWebSocketFactory,
  memoryWebSocketRpc,
  staticTokenRequester,
} from '../../src/testing/mod.ts';
import { notesFixture } from './notes-fixture.ts';

const LOST = { code: 'internal', status: 503, retryable: true, reason: 'rpc_connection_lost' };

async function failureOf(pending: Promise<unknown>) {
  const error = await pending.then(() => assert.fail('expected a failure'), (caught) => caught);
  return { ...svcErrorInfo(error) };
}

async function readAll<T>(stream: ReadableStream<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

test('A test token is accepted over the memory WebSocket; every call shares one connection', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  assert.equal(transport.kind, 'websocket');
  using session = fx.session(transport, fx.tokens.tokenRequester(), ['notes.read', 'notes.write']);
  assert.equal((await session.whoami({})).serviceId, 'billing');
  assert.deepEqual(await session.write({ text: 'x' }), { written: true });
  assert.equal(transport.connections.length, 1);
  const [connection] = transport.connections;
  assert.equal(connection.state, 'open');
  assert.equal((await connection.response).status, 200);
  assert.match(connection.url, /^wss:\/\/svc\.internal\/rpc\/notes\.store(\?|$)/);
});

test('A streaming method streams over the memory WebSocket', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  using session = fx.session(transport, fx.tokens.tokenRequester());
  const items = await readAll(await session.count({ n: 50 }));
  assert.deepEqual(items, Array.from({ length: 50 }, (_, i) => ({ i })));
  assert.deepEqual(await readAll(await session.count({ n: 0 })), []);
});

test('Dropping the connection mid-call fails the call as a lost connection; the next call reconnects', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  using session = fx.session(transport, fx.tokens.tokenRequester());
  try {
    const call = session.wait({});
    await fx.waiting();
    transport.connections[0].drop();
    assert.deepEqual(await failureOf(call), LOST);
    assert.deepEqual(await transport.connections[0].closed, {
      code: 1006,
      reason: '',
      wasClean: false,
    });
    assert.equal(transport.connections[0].state, 'closed');
    assert.equal((await session.whoami({})).serviceId, 'billing');
    assert.equal(transport.connections.length, 2);
  } finally {
    fx.release();
  }
});

/**
 * Reads the first item of a stream that then waits, ends the session under it with `end`, and
 * returns what the next read fails with (and the transport, to check the connection).
 */
async function streamCutShortBy(
  end: (transport: ReturnType<typeof memoryWebSocketRpc>, session: Disposable) => void,
) {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  using session = fx.session(transport, fx.tokens.tokenRequester());
  try {
    const reader = (await session.countThenWait({})).getReader();
    assert.deepEqual(await reader.read(), { done: false, value: { i: 0 } });
    await fx.waiting();
    end(transport, session);
    return { failure: await failureOf(reader.read()), transport };
  } finally {
    fx.release();
  }
}

test('Dropping the connection mid-stream errors the stream after the items already received', async () => {
  const { failure, transport } = await streamCutShortBy((transport) => transport.dropAll());
  // The stream errors rather than ending as if complete (a truncated stream is never silent),
  // and with the same typed, retryable failure the calls on the session get.
  assert.deepEqual(failure, LOST);
  assert.equal(transport.connections[0].state, 'closed');
});

test('Disposing the session mid-stream errors the stream with session_disposed', async () => {
  const { failure } = await streamCutShortBy((_transport, session) =>
    disposeAbilitySession(session)
  );
  assert.deepEqual(failure, {
    code: 'internal',
    status: 500,
    retryable: false,
    reason: 'session_disposed',
  });
});

test('The service closing the connection reports its code and reason to the caller', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  using session = fx.session(transport, fx.tokens.tokenRequester());
  try {
    const call = session.wait({});
    await fx.waiting();
    transport.connections[0].close(1001, 'going away');
    assert.deepEqual(await failureOf(call), LOST);
    assert.deepEqual(await transport.connections[0].closed, {
      code: 1001,
      reason: 'going away',
      wasClean: true,
    });
  } finally {
    fx.release();
  }
});

test('Disposing the session closes the connection cleanly with 1000', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch);
  {
    using session = fx.session(transport, fx.tokens.tokenRequester());
    await session.whoami({});
  }
  assert.deepEqual(await transport.connections[0].closed, {
    code: 1000,
    reason: 'session disposed',
    wasClean: true,
  });
});

test('A refused upgrade fails the call as a lost connection and keeps the refusal readable', async () => {
  const fx = await notesFixture();
  const transport = memoryWebSocketRpc(fx.service.fetch, {
    url: 'https://svc.internal/rpc/notes.missing',
  });
  using session = fx.session(transport, fx.tokens.tokenRequester());
  assert.deepEqual(await failureOf(session.whoami({})), LOST);
  const response = await transport.connections[0].response;
  assert.equal(response.status, 404);
  await response.body?.cancel();
  assert.deepEqual(await transport.connections[0].closed, {
    code: 1006,
    reason: '',
    wasClean: false,
  });
});

test('Scope and audience refusals over the memory WebSocket match the service refusals', async () => {
  const fx = await notesFixture();
  const readOnly = await fx.tokens.token({ aud: 'notes', sub: 'billing', scopes: ['notes.read'] });
  using session = fx.session(memoryWebSocketRpc(fx.service.fetch), staticTokenRequester(readOnly));
  const scope = await failureOf(session.write({ text: 'x' }));
  assert.equal(scope.code, 'capability_auth');
  assert.equal(scope.status, 403);
  const elsewhere = await fx.tokens.token({ aud: 'billing', scopes: ['notes.read'] });
  using other = fx.session(memoryWebSocketRpc(fx.service.fetch), staticTokenRequester(elsewhere));
  assert.deepEqual(await failureOf(other.whoami({})), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    reason: 'audience_mismatch',
  });
});

test('Metadata travels in the upgrade query, and env reaches the service', async () => {
  const fx = await notesFixture();
  let seen: unknown;
  const transport = memoryWebSocketRpc((request, env, ctx) => {
    seen = { binding: (env as { BINDING?: string }).BINDING, ctx };
    return fx.service.fetch(request, env, ctx);
  }, { env: { BINDING: 'b' }, ctx: 'ctx' });
  using session = abilitySession<{ whoami(input: object): Promise<unknown> }>({
    abilityId: 'notes.store',
    callerServiceId: 'billing',
    targetServiceId: 'notes',
    scopes: ['notes.read'],
    requestToken: fx.tokens.tokenRequester(),
    transport,
    requestId: 'req-1',
    idempotencyKey: 'key-1',
  });
  await session.whoami({});
  const url = new URL(transport.connections[0].url);
  assert.equal(url.searchParams.get('request_id'), 'req-1');
  assert.equal(url.searchParams.get('idempotency_key'), 'key-1');
  assert.deepEqual(seen, { binding: 'b', ctx: 'ctx' });
});

test('The transport refuses a non-function fetch and bad options at construction', () => {
  assert.throws(() => memoryWebSocketRpc(undefined as never), SvcConfigurationError);
  assert.throws(() => memoryWebSocketRpc({ fetch() {} } as never), SvcConfigurationError);
  const fetch = () => new Response(null);
  assert.throws(() => memoryWebSocketRpc(fetch, { urll: 'x' } as never), SvcConfigurationError);
  assert.throws(() => memoryWebSocketRpc(fetch, { url: 'ftp://x/rpc' }), SvcConfigurationError);
  assert.throws(() => memoryWebSocketRpc(fetch, { openTimeoutMs: -1 }), SvcConfigurationError);
  assert.throws(() => memoryWebSocketRpc(fetch, { env: 'x' as never }), SvcConfigurationError);
});

test('A control plane reaches a service over memory WebSockets, with a key shared with a test issuer', async () => {
  const signingKey = await generateSigningKeyEntry({ kid: 'plane-1' });
  const tokens = await createTestTokenIssuer({ signingKey, issuer: 'plane' });
  const fx = await notesFixture({ tokens });
  const sockets = memoryWebSocketFactory(fx.service.fetch);
  const plane = createControlPlane({
    id: 'plane',
    issuer: 'plane',
    signingKeys: [signingKey],
    log: false,
    services: [
      httpService({
        id: 'notes',
        url: 'https://notes.test',
        fetch: fx.service.fetch,
        createWebSocket: sockets.createWebSocket,
        grants: [{ caller: 'plane', scopes: ['notes.read'] }],
      }),
    ],
  });
  assert.deepEqual(await plane.jwks(), tokens.jwks);
  using session = plane.abilitySession<{ count(input: { n: number }): Promise<ReadableStream> }>({
    abilityId: 'notes.store',
    targetServiceId: 'notes',
    scopes: ['notes.read'],
  });
  assert.deepEqual(await readAll(await session.count({ n: 3 })), [{ i: 0 }, { i: 1 }, { i: 2 }]);
  assert.equal(sockets.connections.length, 1);
  assert.match(sockets.connections[0].url, /^wss:\/\/notes\.test\/rpc\/notes\.store/);
});
