// serveDeno against clients that misbehave on purpose, seen from their side of a raw socket on
// 127.0.0.1: close() stays bounded whatever is in flight, a malformed handshake is the client's
// 400 rather than a logged server failure, and Hono's own Deno connection-info helper works.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { Hono } from 'hono';
import { getConnInfo } from 'hono/deno';
import { z } from 'zod';
import type { SvcLogEvent } from '../../../src/core/logging.ts';
import { PROBLEM_CONTENT_TYPE } from '../../../src/core/problem.ts';
import { serveDeno } from '../../../src/adapters/deno.ts';
import { defineAbility } from '../../../src/service/ability.ts';
import { abilityMethod } from '../../../src/service/method.ts';
import { createService } from '../../../src/service/service.ts';
import { resolveWebSocketUpgrader } from '../../../src/service/websocket-upgrade.ts';
import { RUNTIME_ISSUER, runtimeSigningKey } from '../service-websocket-fixture.ts';

const BOUND = { timeout: 30_000 };

/** How long close() may take; the old adapter never resolved while a request was in flight. */
const CLOSE_BOUND_MS = 2_000;

/** Longest a raw client waits for the server to hang up before giving up on it. */
const CLIENT_BOUND_MS = 5_000;

const ECHO_PATH = '/rpc/svc-h.echo';

/** A service whose one ability counts every time its handler is built, and its log events. */
async function countingService() {
  const key = await runtimeSigningKey();
  const events: SvcLogEvent[] = [];
  const runs = { handler: 0 };
  const ability = defineAbility({
    id: 'svc-h.echo',
    scopes: ['svc-h.read'],
    rpc: { transports: ['http-batch', 'websocket'] },
    methods: { ping: abilityMethod({ input: z.object({}), output: z.literal('pong') }) },
    handler: () => {
      runs.handler++;
      return { ping: () => 'pong' as const };
    },
  });
  const service = createService({
    id: 'svc-h',
    title: 'Hostile clients',
    version: '1.0.0',
    auth: { jwks: key.jwks, issuer: RUNTIME_ISSUER },
    abilities: [ability],
    logger: (event) => events.push(event),
  });
  return { service, events, runs };
}

interface RawReply {
  /** Everything the server sent, as latin1. */
  text: string;
  /**
   * How the exchange ended: the server hung up, a whole reply (head and `Content-Length` body)
   * arrived, or the client gave up after {@link CLIENT_BOUND_MS}.
   */
  end: 'hung up' | 'replied' | 'gave up';
}

interface RawClient {
  /** The client's own port, as the server sees it. */
  localPort: Promise<number>;
  reply: Promise<RawReply>;
}

/**
 * Writes `payload` on a fresh connection and collects the reply until the exchange ends: at the
 * first whole reply, or only once the server hangs up.
 */
function rawClient(
  port: number,
  payload: string,
  until: 'reply' | 'hang-up' = 'reply',
): RawClient {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  const localPort = new Promise<number>((resolve) => {
    socket.once('connect', () => {
      resolve(socket.localPort ?? 0);
      socket.write(payload);
    });
  });
  const reply = new Promise<RawReply>((resolve) => {
    const finish = (end: RawReply['end']) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, end });
    };
    const timer = setTimeout(() => finish('gave up'), CLIENT_BOUND_MS);
    socket.on('data', (chunk: Uint8Array) => {
      text += latin1.decode(chunk);
      if (until === 'reply' && isWholeReply(text)) finish('replied');
    });
    socket.once('close', () => finish('hung up'));
    socket.once('error', () => finish('hung up'));
  });
  return { localPort, reply };
}

const latin1 = new TextDecoder('latin1');

/** Whether `text` holds a reply head and as many body bytes as its `Content-Length` says. */
function isWholeReply(text: string): boolean {
  const headEnd = text.indexOf('\r\n\r\n');
  const length = headEnd === -1 ? undefined : headerValue(text, 'content-length');
  return length !== undefined && text.length - headEnd - 4 >= Number(length);
}

/** Whether `promise` settles within `ms` (the timer is cleared either way). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise and the function that resolves it. */
function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

/** A WebSocket handshake head for `path`, without the headers named in `omit`. */
function upgradeHead(path: string, omit: readonly string[] = []): string {
  const headers = [
    'Host: x',
    'Upgrade: websocket',
    'Connection: Upgrade',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version: 13',
  ].filter((line) => !omit.some((name) => line.startsWith(`${name}:`)));
  return [`GET ${path} HTTP/1.1`, ...headers, '', ''].join('\r\n');
}

function statusLine(text: string): string {
  return text.split('\r\n')[0];
}

/** The body of a complete HTTP/1.1 reply, parsed as JSON. */
function jsonBody(text: string): Record<string, unknown> {
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
}

function headerValue(text: string, name: string): string | undefined {
  const head = text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n').slice(1);
  const line = head.find((entry) => entry.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

/**
 * The server hung up on a request it had not answered when close() began: nothing reached the
 * client but, at most, the 503 close() answers such requests with.
 */
function assertCutOrRefused(reply: RawReply): void {
  assert.equal(reply.end, 'hung up', 'the server closed the connection');
  if (reply.text !== '') {
    assert.equal(statusLine(reply.text), 'HTTP/1.1 503 Service Unavailable', reply.text);
    assert.equal(jsonBody(reply.text).reason, 'server_closing');
  }
}

test(
  'serveDeno: close() resolves promptly while a client stalls mid-body, and the handler never runs',
  BOUND,
  async () => {
    const { service, runs } = await countingService();
    const arrived = signal();
    const server = await serveDeno({
      fetch(request, env) {
        arrived.resolve();
        return service.fetch(request, env);
      },
    });
    // Declares 1000 bytes, sends 4, then waits: a graceful shutdown would wait with it.
    const client = rawClient(
      server.port,
      `POST ${ECHO_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n` +
        'Content-Length: 1000\r\n\r\n["pu',
      'hang-up',
    );
    await arrived.promise;
    assert.equal(await settlesWithin(server.close(), CLOSE_BOUND_MS), true, 'close() is bounded');
    const reply = await client.reply;
    assertCutOrRefused(reply);
    assert.equal(runs.handler, 0);
  },
);

test(
  'serveDeno: close() resolves while the target never answers a request or an upgrade',
  BOUND,
  async () => {
    let pending = 0;
    const bothArrived = signal();
    const server = await serveDeno({
      fetch() {
        if (++pending === 2) bothArrived.resolve();
        return new Promise<Response>(() => {});
      },
    });
    const plain = rawClient(server.port, 'GET /hang HTTP/1.1\r\nHost: x\r\n\r\n', 'hang-up');
    // Deno holds an unanswered upgrade's connection open even once the server was aborted.
    const upgrade = rawClient(server.port, upgradeHead('/hang-upgrade'), 'hang-up');
    await bothArrived.promise;
    assert.equal(await settlesWithin(server.close(), CLOSE_BOUND_MS), true, 'close() is bounded');
    assertCutOrRefused(await plain.reply);
    assertCutOrRefused(await upgrade.reply);
  },
);

test(
  'serveDeno: an upgrade the target accepts after close() began opens no WebSocket',
  BOUND,
  async () => {
    const arrived = signal();
    const release = signal();
    const upgraded = signal<{ status: number; accepted: boolean }>();
    const server = await serveDeno({
      async fetch(request, env) {
        arrived.resolve();
        await release.promise;
        let accepted = false;
        const upgrader = resolveWebSocketUpgrader(env);
        assert.ok(upgrader !== undefined, 'serveDeno places its upgrader on env');
        const response = await upgrader.upgrade(request, env, () => (accepted = true));
        upgraded.resolve({ status: response.status, accepted });
        return response;
      },
    });
    const client = rawClient(server.port, upgradeHead('/late'), 'hang-up');
    await arrived.promise;
    const closed = server.close();
    release.resolve();
    assert.deepEqual(await upgraded.promise, { status: 503, accepted: false });
    assert.equal(await settlesWithin(closed, CLOSE_BOUND_MS), true, 'close() is bounded');
    assertCutOrRefused(await client.reply);
  },
);

test(
  'serveDeno: a handshake Deno.upgradeWebSocket rejects is a 400 problem and opens nothing',
  BOUND,
  async () => {
    let accepted = 0;
    // Hands every request straight to the upgrader: the backstop behind any handshake screen.
    const server = await serveDeno({
      fetch(request, env) {
        return resolveWebSocketUpgrader(env)!.upgrade(request, env, () => accepted++);
      },
    });
    try {
      for (const omit of ['Sec-WebSocket-Key', 'Connection']) {
        const { reply } = rawClient(server.port, upgradeHead('/raw', [omit]));
        const { text } = await reply;
        assert.equal(statusLine(text), 'HTTP/1.1 400 Bad Request', `without ${omit}`);
        assert.equal(headerValue(text, 'content-type'), PROBLEM_CONTENT_TYPE);
        const body = jsonBody(text);
        assert.equal(body.status, 400);
        assert.equal(body.reason, 'websocket_handshake_malformed');
        assert.equal(body.retryable, false);
      }
      assert.equal(accepted, 0);
    } finally {
      await server.close();
    }
  },
);

test(
  'serveDeno: a malformed handshake to a real service is a 400, logs no error and runs nothing',
  BOUND,
  async () => {
    const { service, events, runs } = await countingService();
    const server = await serveDeno(service);
    try {
      for (const omit of ['Sec-WebSocket-Key', 'Connection']) {
        const { reply } = rawClient(server.port, upgradeHead(ECHO_PATH, [omit]));
        const { text } = await reply;
        assert.equal(statusLine(text), 'HTTP/1.1 400 Bad Request', `without ${omit}`);
        assert.equal(headerValue(text, 'content-type'), PROBLEM_CONTENT_TYPE);
      }
      const errors = events.filter((event) => event.level === 'error');
      assert.deepEqual(errors.map((event) => event.event), []);
      assert.equal(runs.handler, 0);
    } finally {
      await server.close();
    }
  },
);

test(
  "serveDeno: Hono's getConnInfo from hono/deno reports the client's address and port",
  BOUND,
  async () => {
    const app = new Hono<{ Bindings: { info?: { remoteAddr?: unknown } } }>();
    app.get('*', (c) => c.json({ ...getConnInfo(c), info: c.env.info?.remoteAddr }));
    const server = await serveDeno(app);
    try {
      for (
        const payload of [
          'GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
          upgradeHead('/upgrade'),
        ]
      ) {
        const client = rawClient(server.port, payload);
        const { text } = await client.reply;
        assert.equal(statusLine(text), 'HTTP/1.1 200 OK', text);
        const port = await client.localPort;
        const peer = { transport: 'tcp', hostname: '127.0.0.1', port };
        assert.deepEqual(jsonBody(text), {
          remote: { address: '127.0.0.1', port, transport: 'tcp' },
          // The connection info serveDeno always gave stays where it was.
          info: peer,
        });
      }
    } finally {
      await server.close();
    }
  },
);
