/**
 * The WebSocket scenarios every runtime runs over a real socket: the fake main (session,
 * HTTP-batch pipelining, a refused upgrade) and the real zod and arktype services. Each
 * runtime's test file only says how it serves a fetch target and opens client sockets.
 */
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import type { FetchTarget } from '../../src/adapters/serve-target.ts';
import { abilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import {
  SEND_BUFFER_FULL_CLOSE,
  WebSocketRpcTransport,
} from '../../src/service/websocket-rpc-transport.ts';
import {
  SVC_WEBSOCKET_UPGRADER,
  type WebSocketUpgrader,
} from '../../src/service/websocket-upgrade.ts';
import { svcErrorInfo } from '../../src/core/errors.ts';
import {
  FAKE_TOKEN,
  type FakeMainRecord,
  fakeRpcEndpoint,
  newFakeRecord,
} from '../support/fake-main.ts';
import {
  assertServiceOverWebSocket,
  readTicks,
  runtimeServices,
  runtimeSigningKey,
} from './service-websocket-fixture.ts';

/** The part of the fake main's ability the scenarios call. */
export interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

/** How a client on one runtime reaches a server: its request id and socket factory. */
export interface WebSocketClientRuntime {
  /** The request id every session sends; each runtime's own. */
  requestId: string;
  /** Opens client sockets; the global `WebSocket` when absent. */
  createWebSocket?: (url: string) => WebSocket;
}

/** A runtime that also serves: its serving helper, bound to 127.0.0.1 on an ephemeral port. */
export interface WebSocketServingRuntime extends WebSocketClientRuntime {
  serve(target: FetchTarget): Promise<{ url: string; close(): Promise<void> }>;
}

/** A session with the fake main over `transport`, sending the fixed token and `requestId`. */
export function fakeSession(transport: RpcTransportFactory, requestId: string) {
  return abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    requestId,
  });
}

/** A session with the fake main at `rpcUrl` over a WebSocket opened the runtime's way. */
export function fakeWebSocketSession(rpcUrl: string | URL, client: WebSocketClientRuntime) {
  const options = client.createWebSocket !== undefined
    ? { createWebSocket: client.createWebSocket }
    : {};
  return fakeSession(websocketRpc(rpcUrl, options), client.requestId);
}

/** Serves `target` with the runtime's helper on 127.0.0.1, runs `run`, and always closes. */
async function withServed(
  runtime: WebSocketServingRuntime,
  target: FetchTarget,
  run: (url: string) => Promise<void>,
): Promise<void> {
  const server = await runtime.serve(target);
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    await run(server.url);
  } finally {
    await server.close();
  }
}

/** One WebSocket session echoes `value` (the server is still healthy). */
export async function assertEchoesOverWebSocket(
  rpcUrl: string | URL,
  client: WebSocketClientRuntime,
  value: string,
): Promise<void> {
  const session = fakeWebSocketSession(rpcUrl, client);
  try {
    assert.deepEqual(await session.echo({ value }), { value });
  } finally {
    disposeAbilitySession(session);
  }
}

/**
 * One WebSocket session with the fake main at `rpcUrl` authenticates once, echoes, reports its
 * transport and streams 10 000 items in order; `readRecord` then shows one authenticated session
 * carrying the request id, and no global `WebSocket` was installed on the way.
 */
export async function assertSessionStreams(
  rpcUrl: string | URL,
  client: WebSocketClientRuntime,
  readRecord: () => Promise<FakeMainRecord>,
): Promise<void> {
  const globalBefore = (globalThis as { WebSocket?: unknown }).WebSocket;
  const session = fakeWebSocketSession(rpcUrl, client);
  try {
    assert.deepEqual(await session.echo({ value: 'over a socket' }), { value: 'over a socket' });
    assert.deepEqual(await session.whoami({}), { transport: 'websocket' });
    assert.equal(await readTicks(await session.ticks({ n: 10_000 })), 10_000);
  } finally {
    disposeAbilitySession(session);
  }
  const record = await readRecord();
  assert.equal(record.authenticated.length, 1);
  assert.equal(record.sessions.length, 1);
  assert.equal(record.sessions[0].query.request_id, client.requestId);
  assert.equal((globalThis as { WebSocket?: unknown }).WebSocket, globalBefore);
}

/** The served fake main: a WebSocket session authenticates, calls and streams 10 000 items. */
export async function servedSessionStreams(runtime: WebSocketServingRuntime): Promise<void> {
  const record = newFakeRecord();
  await withServed(runtime, fakeRpcEndpoint(record), async (url) => {
    await assertSessionStreams(`${url}/rpc/fake.echo`, runtime, () => Promise.resolve(record));
  });
}

/** The served fake main: HTTP-batch sends authenticate and the call in one request. */
export async function servedBatchPipelines(runtime: WebSocketServingRuntime): Promise<void> {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  await withServed(runtime, endpoint, async (url) => {
    const session = fakeSession(httpBatchRpc(`${url}/rpc/fake.echo`), runtime.requestId);
    try {
      assert.deepEqual(await session.echo({ value: 'batch' }), { value: 'batch' });
      assert.equal(endpoint.requests.length, 1);
      assert.equal(record.sessions[0].headers['x-request-id'], runtime.requestId);
    } finally {
      disposeAbilitySession(session);
    }
  });
}

/**
 * The served fake main offers HTTP-batch only: a WebSocket session is refused and never
 * reaches the main. `probe` first looks at the refusal on the wire where the runtime can.
 */
export async function servedUpgradeRefused(
  runtime: WebSocketServingRuntime,
  probe?: (url: string) => Promise<void>,
): Promise<void> {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record, { transports: ['http-batch'] });
  await withServed(runtime, endpoint, async (url) => {
    await probe?.(url);
    const session = fakeWebSocketSession(`${url}/rpc/fake.echo`, runtime);
    try {
      await assert.rejects(session.echo({ value: 'refused' }));
      assert.equal(record.sessions.length, 0);
    } finally {
      disposeAbilitySession(session);
    }
  });
}

/**
 * A WebSocket session to a path the server does not serve fails with the refusal's own status,
 * the URL it dialled and not retryable, as an HTTP-batch to that path does: a wrong path is a
 * mistake, not a lost connection to retry forever. The query (per-call metadata) is not named.
 */
export async function servedWrongPathRefused(runtime: WebSocketServingRuntime): Promise<void> {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  // Served at its own path only, as a service serves each ability's RPC path.
  const routed: FetchTarget = {
    fetch: (request, env) =>
      new URL(request.url).pathname === '/rpc/fake.echo'
        ? endpoint.fetch(request, env)
        : new Response('No such route', { status: 404 }),
  };
  await withServed(runtime, routed, async (url) => {
    const wrong = `${url}/rpc/no.such.ability`;
    const session = fakeWebSocketSession(wrong, runtime);
    try {
      const error = await session.echo({ value: 'lost' }).then(() => undefined, (caught) => caught);
      assert.deepEqual({ ...svcErrorInfo(error) }, {
        code: 'internal',
        status: 404,
        retryable: false,
        reason: 'rpc_upgrade_refused',
      });
      const message = (error as Error).message;
      assert.ok(message.includes(wrong.replace('http:', 'ws:') + ' '), message);
      assert.ok(!message.includes('request_id'), message);
      assert.equal(record.sessions.length, 0);
    } finally {
      disposeAbilitySession(session);
    }
  });
}

/**
 * The served fake main behind a TCP relay whose first connection is accepted and never answered:
 * the session's first socket never opens, so its call fails once the open timeout passes, and
 * the next call opens a fresh socket that reaches the healthy main.
 */
export async function servedAfterSilentHandshake(runtime: WebSocketServingRuntime): Promise<void> {
  await withServed(runtime, fakeRpcEndpoint(), async (url) => {
    const upstreamPort = Number(new URL(url).port);
    const relayed: Socket[] = [];
    let connections = 0;
    const relay = createServer((client) => {
      relayed.push(client);
      client.on('error', () => client.destroy());
      if (++connections === 1) return;
      const upstream = connect(upstreamPort, '127.0.0.1');
      relayed.push(upstream);
      upstream.on('error', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', () => resolve()));
    const address = relay.address();
    const relayPort = typeof address === 'object' && address !== null ? address.port : 0;
    const session = fakeSession(
      websocketRpc(`ws://127.0.0.1:${relayPort}/rpc/fake.echo`, {
        // The healthy second socket must open within it: a local handshake takes a few ms, so
        // this leaves ≥10× slack on a busy machine (the silent first one costs the whole wait).
        openTimeoutMs: 2_000,
        ...(runtime.createWebSocket !== undefined
          ? { createWebSocket: runtime.createWebSocket }
          : {}),
      }),
      runtime.requestId,
    );
    try {
      await assert.rejects(session.echo({ value: 'lost' }));
      assert.deepEqual(await session.echo({ value: 'recovered' }), { value: 'recovered' });
      assert.equal(connections, 2);
    } finally {
      disposeAbilitySession(session);
      for (const socket of relayed) socket.destroy();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    }
  });
}

/**
 * The bytes of a client's WebSocket upgrade request for `target` (path and query), with `extra`
 * header lines; for raw-socket tests that must see or withhold what a WebSocket client hides.
 */
export function rawUpgradeRequest(target: string, extra: string[] = []): string {
  return [
    `GET ${target} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Upgrade: websocket',
    'Connection: Upgrade',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version: 13',
    ...extra,
    '',
    '',
  ].join('\r\n');
}

/** Whether `bytes` holds an unmasked server close frame carrying `code`. */
function holdsCloseFrame(bytes: Uint8Array, code: number): boolean {
  for (let i = bytes.length - 4; i >= 0; i--) {
    if (bytes[i] === 0x88 && bytes[i + 2] === code >> 8 && bytes[i + 3] === (code & 0xff)) {
      return true;
    }
  }
  return false;
}

/**
 * A raw TCP peer that upgrades and then stops reading, while the server's RPC transport sends
 * 256 KiB messages: once more than the transport's limit (1 MiB here) waits unsent beyond what
 * the kernel buffers, the connection closes with 1013 and the transport fails with a retryable
 * 503, instead of the server buffering for as long as the peer stays connected. Once the peer
 * reads again, the close frame arrives after what was sent.
 */
export async function servedSlowReaderClosed(runtime: WebSocketServingRuntime): Promise<void> {
  const message = 'x'.repeat(256 * 1024);
  // 32 MiB in all: past any loopback kernel buffering plus the limit.
  const maxSends = 128;
  let transportFailed!: (error: unknown) => void;
  const failure = new Promise<unknown>((resolve) => (transportFailed = resolve));
  const target: FetchTarget = {
    fetch(request, env) {
      const upgrader = (env as Record<PropertyKey, unknown>)[
        SVC_WEBSOCKET_UPGRADER
      ] as WebSocketUpgrader;
      return upgrader.upgrade(request, env, (socket) => {
        const transport = new WebSocketRpcTransport(socket, { maxBufferedBytes: 1024 * 1024 });
        transport.receive().then(
          () => transportFailed(new Error('the raw peer sent a message')),
          transportFailed,
        );
        for (let i = 0; i < maxSends; i++) transport.send(message);
      });
    },
  };
  const server = await runtime.serve(target);
  const client = connect(Number(new URL(server.url).port), '127.0.0.1');
  client.on('error', () => {});
  let tail = new Uint8Array(0);
  let sawClose!: () => void;
  const closeFrameSeen = new Promise<void>((resolve) => (sawClose = resolve));
  client.on('data', (data: Uint8Array) => {
    const joined = new Uint8Array(tail.length + data.length);
    joined.set(tail);
    joined.set(data, tail.length);
    tail = joined.subarray(Math.max(0, joined.length - 256));
    if (holdsCloseFrame(tail, SEND_BUFFER_FULL_CLOSE.code)) sawClose();
  });
  let bound: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    bound = setTimeout(() => reject(new Error('no 1013 close within 20 s')), 20_000);
  });
  try {
    client.write(rawUpgradeRequest('/slow'));
    client.pause();
    const error = await Promise.race([failure, timedOut]);
    assert.deepEqual(svcErrorInfo(error), {
      code: 'internal',
      status: 503,
      retryable: true,
      reason: 'send_buffer_full',
    });
    client.resume();
    await Promise.race([closeFrameSeen, timedOut]);
  } finally {
    clearTimeout(bound);
    client.destroy();
    await server.close();
  }
}

/** A signing key's public JWKS and its token signer (see `runtimeSigningKey`). */
export type RuntimeSigningKey = Awaited<ReturnType<typeof runtimeSigningKey>>;

/** The zod service and then the arktype service at `baseUrl` pass the WebSocket criterion. */
export async function assertBothServicesOverWebSocket(
  baseUrl: string,
  key: RuntimeSigningKey,
  createWebSocket?: (url: string) => WebSocket,
): Promise<void> {
  await assertServiceOverWebSocket(baseUrl, 'svc-zod', key.token, createWebSocket);
  await assertServiceOverWebSocket(baseUrl, 'svc-ark', key.token, createWebSocket);
}

/** A token minted for svc-ark is refused by svc-zod at `baseUrl` as a capability failure. */
export async function assertForeignTokenRefused(
  baseUrl: string,
  key: RuntimeSigningKey,
  createWebSocket?: (url: string) => WebSocket,
): Promise<void> {
  await assert.rejects(
    assertServiceOverWebSocket(baseUrl, 'svc-zod', () => key.token('svc-ark'), createWebSocket),
    (error: unknown) => (error as { code?: string }).code === 'capability_auth',
  );
}

/** The real zod and arktype services, served by the runtime, over a WebSocket. */
export async function servedServicesOverWebSocket(
  runtime: WebSocketServingRuntime,
): Promise<void> {
  const key = await runtimeSigningKey();
  await withServed(runtime, runtimeServices(key.jwks), async (url) => {
    await assertBothServicesOverWebSocket(url, key, runtime.createWebSocket);
  });
}

/** The real services, served by the runtime, refuse a token for another service. */
export async function servedForeignTokenRefused(runtime: WebSocketServingRuntime): Promise<void> {
  const key = await runtimeSigningKey();
  await withServed(runtime, runtimeServices(key.jwks), async (url) => {
    await assertForeignTokenRefused(url, key, runtime.createWebSocket);
  });
}

/**
 * The real service's `101` at `url` echoes the request id the caller sent, as every other
 * response does, whoever completes the upgrade: a stand-in answer on Node and Bun, the runtime's
 * own `101` on Deno and in workerd.
 */
export async function assertHandshakeEchoesRequestId(url: string, requestId: string) {
  const head = await handshakeHead(
    url,
    rawUpgradeRequest(`/rpc/svc-zod.echo?request_id=${requestId}`, [`X-Request-Id: ${requestId}`]),
  );
  assert.match(head[0], /^HTTP\/1\.1 101 /);
  assert.deepEqual(headerValues(head, 'x-request-id'), [requestId]);
}

/** Sends `upgrade` over a raw socket to `url` and returns the answer's head, line by line. */
async function handshakeHead(url: string, upgrade: string): Promise<string[]> {
  const client = connect(Number(new URL(url).port), '127.0.0.1');
  client.on('error', () => {});
  let head = '';
  let bound: ReturnType<typeof setTimeout> | undefined;
  try {
    const headRead = new Promise<string>((resolve, reject) => {
      bound = setTimeout(() => reject(new Error('no handshake answer within 10 s')), 10_000);
      client.on('data', (data: Uint8Array) => {
        head += new TextDecoder().decode(data);
        const end = head.indexOf('\r\n\r\n');
        if (end >= 0) resolve(head.slice(0, end));
      });
    });
    client.write(upgrade);
    return (await headRead).split('\r\n');
  } finally {
    clearTimeout(bound);
    client.destroy();
  }
}

/** The values of header `name` (any case) among a response head's lines, in order. */
function headerValues(head: string[], name: string): string[] {
  const prefix = `${name.toLowerCase()}:`;
  return head.slice(1)
    .filter((line) => line.toLowerCase().startsWith(prefix))
    .map((line) => line.slice(prefix.length).trim());
}

/**
 * A target that sets two cookies on its upgrade answer (session middleware, say): both ride on
 * the `101`, not only the last one.
 */
export async function servedHandshakeKeepsEveryCookie(
  runtime: WebSocketServingRuntime,
): Promise<void> {
  const endpoint = fakeRpcEndpoint();
  const target: FetchTarget = {
    async fetch(request, env) {
      const response = await endpoint.fetch(request, env);
      response.headers.append('Set-Cookie', 'a=1; Path=/');
      response.headers.append('Set-Cookie', 'b=2; Path=/');
      return response;
    },
  };
  await withServed(runtime, target, async (url) => {
    const head = await handshakeHead(url, rawUpgradeRequest('/rpc/fake.echo'));
    assert.match(head[0], /^HTTP\/1\.1 101 /);
    assert.deepEqual(headerValues(head, 'set-cookie'), ['a=1; Path=/', 'b=2; Path=/']);
  });
}

/** {@link assertHandshakeEchoesRequestId} for the real services served by `runtime`. */
export async function servedHandshakeEchoesRequestId(
  runtime: WebSocketServingRuntime,
): Promise<void> {
  const key = await runtimeSigningKey();
  await withServed(runtime, runtimeServices(key.jwks), async (url) => {
    await assertHandshakeEchoesRequestId(url, `${runtime.requestId}-handshake`);
  });
}

/**
 * A client offering subprotocols is never agreed one (RFC 6455 section 4.2.2): an RPC session
 * speaks none, so the `101` carries no `Sec-WebSocket-Protocol`.
 */
export async function servedNoSubprotocolAgreed(runtime: WebSocketServingRuntime): Promise<void> {
  await withServed(runtime, fakeRpcEndpoint(), async (url) => {
    const head = await handshakeHead(
      url,
      rawUpgradeRequest('/rpc/fake.echo', ['Sec-WebSocket-Protocol: graphql-ws, mqtt']),
    );
    assert.match(head[0], /^HTTP\/1\.1 101 /);
    assert.deepEqual(headerValues(head, 'sec-websocket-protocol'), []);
  });
}

/**
 * A target that throws (a bare Hono app may; a service never does) is answered with a bare 500:
 * not the error's message, a stack, or a development error page with source paths.
 */
export async function servedThrowingTargetAnswersBare500(
  runtime: WebSocketServingRuntime,
): Promise<void> {
  const marker = `SECRET-${crypto.randomUUID()}`;
  const target: FetchTarget = {
    fetch() {
      throw new Error(`${marker} postgres://user:pass@db.internal/prod`);
    },
  };
  const quiet = console.error;
  console.error = () => {};
  try {
    await withServed(runtime, target, async (url) => {
      const response = await fetch(`${url}/anything`);
      const body = await response.text();
      assert.equal(response.status, 500);
      assert.equal(body.includes(marker), false, 'the message stays on the server');
      assert.equal(/user:pass|\/src\/|\.ts\b|<html/i.test(body), false, body.slice(0, 200));
    });
  } finally {
    console.error = quiet;
  }
}
