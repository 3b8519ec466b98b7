// The Node serving helpers and the `ws` client factory seen from a hostile peer: request targets
// that would forge the URL an upgrade is served under, refused upgrades on routes whose body
// never ends, subprotocol offers the RPC route does not speak, and client limits that `ws`
// would read as "no limit". Raw sockets stand for the attacker.
import assert from 'node:assert/strict';
import { createServer as createHttpsServer } from 'node:https';
import { connect as connectTcp, type Socket } from 'node:net';
import { test } from 'node:test';
import { connect as connectTls } from 'node:tls';
import { WebSocketServer } from 'ws';
import { attachWebSocketUpgrades, serveNode } from '../../../src/adapters/node.ts';
import { wsWebSocketFactory } from '../../../src/adapters/ws-client.ts';
import { SvcConfigurationError } from '../../../src/core/errors.ts';
import {
  isWebSocketUpgradeRequest,
  resolveWebSocketUpgrader,
} from '../../../src/service/websocket-upgrade.ts';

const BOUND = { timeout: 30_000 };

/** The refusal body limit of the Node helper (64 KiB). */
const REFUSAL_LIMIT_BYTES = 64 * 1024;

/** The route a test target serves; every other path is a 404. */
const ROUTE = '/rpc/echo';

/** A fetch target that records what it saw and which requests reached its route's handler. */
interface RecordingTarget {
  fetch(request: Request, env?: unknown): Response | Promise<Response>;
  /** The URL of every request the target was called with. */
  seen: string[];
  /** The URL of every request its route's handler ran for. */
  handled: string[];
}

/**
 * Routes on the request URL, then refuses a cross-origin `Origin` (the usual guard against
 * cross-site WebSocket hijacking), then accepts an upgrade or answers 200.
 */
function recordingTarget(): RecordingTarget {
  const seen: string[] = [];
  const handled: string[] = [];
  return {
    seen,
    handled,
    fetch(request, env) {
      seen.push(request.url);
      const url = new URL(request.url);
      if (url.pathname !== ROUTE) return new Response('no route', { status: 404 });
      const origin = request.headers.get('origin');
      if (origin !== null && origin !== url.origin) {
        return new Response('cross-origin', { status: 403 });
      }
      handled.push(request.url);
      if (!isWebSocketUpgradeRequest(request)) return new Response('plain');
      return resolveWebSocketUpgrader(env)!.upgrade(request, env, (socket) => socket.close());
    },
  };
}

/**
 * Writes `payload` on `socket` and collects the reply until the peer closes, `ms` pass, or the
 * head of a `101` is in (the WebSocket that follows stays open until one side closes it).
 */
function exchangeOn(socket: Socket, payload: string, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let reply = '';
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reply);
    };
    const timer = setTimeout(finish, ms);
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1');
      if (reply.startsWith('HTTP/1.1 101 ') && reply.includes('\r\n\r\n')) finish();
    });
    socket.on('close', finish);
    socket.on('error', finish);
    socket.write(payload);
  });
}

/** {@link exchangeOn} over a fresh TCP connection to 127.0.0.1. */
function exchange(port: number, payload: string, ms = 2_000): Promise<string> {
  return exchangeOn(connectTcp(port, '127.0.0.1'), payload, ms);
}

/** The status code of a raw HTTP reply; 0 when there is none. */
function statusOf(reply: string): number {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(reply);
  return match === null ? 0 : Number(match[1]);
}

/** The head of a WebSocket upgrade request for `target`. */
function upgradeHead(target: string, headers: string[] = ['Host: x']): string {
  return [
    `GET ${target} HTTP/1.1`,
    ...headers,
    'Upgrade: websocket',
    'Connection: Upgrade',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    'Sec-WebSocket-Version: 13',
    '',
    '',
  ].join('\r\n');
}

/** The head of a plain GET for `target`. */
function plainHead(target: string, headers: string[] = ['Host: x']): string {
  return [`GET ${target} HTTP/1.1`, ...headers, 'Connection: close', '', ''].join('\r\n');
}

test(
  'an upgrade to //evil.test/<route> is the 404 it is over HTTP, not a forged host',
  BOUND,
  async () => {
    const target = recordingTarget();
    const server = await serveNode(target);
    try {
      // The Origin matches the host the target would wrongly read from the path.
      const headers = ['Host: x', 'Origin: http://evil.test'];
      const plain = await exchange(server.port, plainHead(`//evil.test${ROUTE}`, headers));
      const upgrade = await exchange(server.port, upgradeHead(`//evil.test${ROUTE}`, headers));
      assert.equal(statusOf(plain), 404);
      assert.equal(statusOf(upgrade), 404);
      assert.deepEqual(target.seen, [`http://x//evil.test${ROUTE}`, `http://x//evil.test${ROUTE}`]);
      assert.deepEqual(target.handled, []);
    } finally {
      await server.close();
    }
  },
);

test(
  'an upgrade to /\\evil.test/<route> is refused with a 400 before the target runs',
  BOUND,
  async () => {
    const target = recordingTarget();
    const server = await serveNode(target);
    try {
      const plain = await exchange(server.port, plainHead(`/\\evil.test${ROUTE}`));
      const upgrade = await exchange(server.port, upgradeHead(`/\\evil.test${ROUTE}`));
      assert.equal(statusOf(plain), 400);
      assert.equal(statusOf(upgrade), 400);
      assert.deepEqual(target.seen, []);
    } finally {
      await server.close();
    }
  },
);

test(
  'an upgrade and a plain request for the same bytes get the same URL or the same 400',
  BOUND,
  async () => {
    const cases: Array<[target: string, host: string | undefined]> = [
      [ROUTE, 'x'],
      [ROUTE, ''],
      [`http://x${ROUTE}`, undefined],
      [`${ROUTE}?q=\\`, 'x'],
      [`/a/../rpc/./echo`, 'x'],
      [`/rpc/%65cho`, 'x'],
      [`//evil.test${ROUTE}`, 'X'],
      [`/\\evil.test${ROUTE}`, 'X'],
      [ROUTE, 'Example.TEST:80'],
      [ROUTE, 'evil.test@x'],
      [ROUTE, 'x/evil'],
      [ROUTE, 'x:99999'],
      [`?${ROUTE}`, 'x'],
      [`?q`, 'X'],
      [`http://x${ROUTE}`, 'y'],
      [`https://x${ROUTE}`, 'y'],
      [`http://x\\evil${ROUTE}`, 'y'],
    ];
    for (const [path, host] of cases) {
      const target = recordingTarget();
      const server = await serveNode(target);
      try {
        const headers = host === undefined ? [] : [`Host: ${host}`];
        const plain = statusOf(await exchange(server.port, plainHead(path, headers)));
        const upgrade = statusOf(await exchange(server.port, upgradeHead(path, headers)));
        const label = `GET ${path} with Host: ${host}`;
        // The route answers a plain request 200 and an upgrade 101; a refusal is the same.
        assert.equal(upgrade, plain === 200 ? 101 : plain, label);
        assert.equal(target.seen.length, plain === 400 ? 0 : 2, label);
        assert.equal(target.seen[1], target.seen[0], label);
      } finally {
        await server.close();
      }
    }
  },
);

test('an absolute-form upgrade target is served as its own URL, as over HTTP', BOUND, async () => {
  const target = recordingTarget();
  const server = await serveNode(target);
  try {
    const url = `http://127.0.0.1:${server.port}${ROUTE}`;
    assert.equal(statusOf(await exchange(server.port, upgradeHead(url, ['Host: ignored']))), 101);
    assert.deepEqual(target.handled, [url]);
  } finally {
    await server.close();
  }
});

test('an HTTP/1.1 upgrade without Host is refused with a 400, as over HTTP', BOUND, async () => {
  const target = recordingTarget();
  const server = await serveNode(target);
  try {
    assert.equal(statusOf(await exchange(server.port, plainHead(ROUTE, []))), 400);
    assert.equal(statusOf(await exchange(server.port, upgradeHead(ROUTE, []))), 400);
    assert.deepEqual(target.seen, []);
  } finally {
    await server.close();
  }
});

test('an upgrade on an https.Server is served under an https: URL', BOUND, async () => {
  // TLS with a pre-shared key: an encrypted socket without a certificate to ship.
  const psk = Buffer.alloc(32, 7);
  const tls = { ciphers: 'PSK-AES128-GCM-SHA256', maxVersion: 'TLSv1.2' as const };
  const server = createHttpsServer({ ...tls, pskCallback: () => psk });
  const target = recordingTarget();
  const upgrades = attachWebSocketUpgrades(server, target);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as { port: number };
    const socket = connectTls({
      ...tls,
      host: '127.0.0.1',
      port,
      pskCallback: () => ({ psk, identity: 'test' }),
      checkServerIdentity: () => undefined,
    });
    await new Promise((resolve, reject) =>
      socket.once('secureConnect', resolve).once('error', reject)
    );
    const reply = await exchangeOn(socket, upgradeHead(ROUTE), 2_000);
    assert.equal(statusOf(reply), 101);
    assert.deepEqual(target.handled, [`https://x${ROUTE}`]);
  } finally {
    upgrades.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A body that never ends, counting what was pulled from it and whether it was cancelled. */
function endlessBody(chunkBytes: number, everyMs: number) {
  const state = { pulledBytes: 0, cancelled: false, stopped: false };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, everyMs));
      // Ends the stream once the test is over, whatever the helper did with it.
      if (state.stopped) return controller.close();
      state.pulledBytes += chunkBytes;
      controller.enqueue(new Uint8Array(chunkBytes).fill(0x61));
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { body, state };
}

test(
  'a refused upgrade on an endless route reads at most the limit, and writes no cut body',
  BOUND,
  async () => {
    const chunkBytes = 16 * 1024;
    const { body, state } = endlessBody(chunkBytes, 0);
    const server = await serveNode({
      fetch: () => new Response(body, { headers: { 'content-type': 'text/event-stream' } }),
    });
    try {
      const reply = await exchange(server.port, upgradeHead('/events'), 1_500);
      assert.equal(statusOf(reply), 200);
      assert.match(reply, /\r\ncontent-length: 0\r\n/i);
      assert.ok(reply.endsWith('\r\n\r\n'), 'a body was written');
      assert.ok(state.pulledBytes <= REFUSAL_LIMIT_BYTES + 4 * chunkBytes, `${state.pulledBytes}`);
      assert.equal(state.cancelled, true);
    } finally {
      await server.close();
      state.stopped = true;
    }
  },
);

test('a refused upgrade whose body fits the limit is written whole', BOUND, async () => {
  const server = await serveNode({
    fetch: () =>
      new Response(
        new ReadableStream({
          async start(controller) {
            for (const part of ['not ', 'for ', 'you']) {
              await new Promise((resolve) => setTimeout(resolve, 5));
              controller.enqueue(new TextEncoder().encode(part));
            }
            controller.close();
          },
        }),
        { status: 403 },
      ),
  });
  try {
    const reply = await exchange(server.port, upgradeHead('/private'));
    assert.equal(statusOf(reply), 403);
    assert.match(reply, /\r\ncontent-length: 11\r\n/i);
    assert.ok(reply.endsWith('\r\n\r\nnot for you'), reply);
  } finally {
    await server.close();
  }
});

test('a refusal body still streaming is cancelled when the peer leaves', BOUND, async () => {
  const { body, state } = endlessBody(16, 20);
  const server = await serveNode({ fetch: () => new Response(body, { status: 403 }) });
  try {
    assert.equal(await exchange(server.port, upgradeHead('/slow'), 200), '');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(state.cancelled, true);
    const pulledAtCancel = state.pulledBytes;
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(state.pulledBytes, pulledAtCancel);
  } finally {
    await server.close();
    state.stopped = true;
  }
});

test('a refusal body still streaming is cancelled by close()', BOUND, async () => {
  const { body, state } = endlessBody(16, 20);
  const server = await serveNode({ fetch: () => new Response(body, { status: 403 }) });
  const socket = connectTcp(server.port, '127.0.0.1');
  const reply = exchangeOn(socket, upgradeHead('/slow'), 5_000);
  try {
    await new Promise((resolve) => setTimeout(resolve, 200));
  } finally {
    await server.close();
  }
  assert.equal(await reply, '');
  await new Promise((resolve) => setTimeout(resolve, 100));
  state.stopped = true;
  assert.equal(state.cancelled, true);
});

test('an upgrade offering subprotocols is accepted with none selected', BOUND, async () => {
  const target = recordingTarget();
  const server = await serveNode(target);
  try {
    const head = upgradeHead(ROUTE, ['Host: x', 'Sec-WebSocket-Protocol: graphql-ws, mqtt']);
    const reply = await exchange(server.port, head);
    assert.equal(statusOf(reply), 101);
    assert.doesNotMatch(reply.split('\r\n\r\n')[0], /sec-websocket-protocol/i);
  } finally {
    await server.close();
  }
});

test('wsWebSocketFactory refuses a maxPayload that ws would read as no limit, or would wrap', () => {
  for (const maxPayload of [0, -1, Number.NaN, Infinity, 1.5, 2 ** 31, 4 * 1024 ** 3, '1024']) {
    assert.throws(
      () => wsWebSocketFactory({ maxPayload } as never),
      SvcConfigurationError,
      String(maxPayload),
    );
  }
  assert.equal(typeof wsWebSocketFactory({ maxPayload: 1 }), 'function');
  assert.equal(typeof wsWebSocketFactory({ maxPayload: 2 ** 31 - 1 }), 'function');
});

test('wsWebSocketFactory refuses a misspelt option and options that are not an object', () => {
  assert.throws(() => wsWebSocketFactory({ maxPayLoad: 1024 } as never), SvcConfigurationError);
  assert.throws(() => wsWebSocketFactory(null as never), SvcConfigurationError);
  assert.throws(() => wsWebSocketFactory([] as never), SvcConfigurationError);
});

test(
  'a ws-backed client drops the connection on a message above its maxPayload',
  BOUND,
  async () => {
    const hostile = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((resolve) => hostile.once('listening', resolve));
    hostile.on('connection', (peer) => peer.send('x'.repeat(2048)));
    try {
      const { port } = hostile.address() as { port: number };
      const socket = wsWebSocketFactory({ maxPayload: 1024 })(`ws://127.0.0.1:${port}/`);
      let failure = '';
      const outcome = await new Promise<string>((resolve) => {
        socket.addEventListener('message', () => resolve('message received'));
        socket.addEventListener('error', (event) => (failure = (event as ErrorEvent).message));
        socket.addEventListener('close', (event) => resolve(`closed ${event.code}`));
      });
      assert.equal(outcome, 'closed 1006');
      assert.equal(failure, 'Max payload size exceeded');
    } finally {
      for (const peer of hostile.clients) peer.terminate();
      await new Promise((resolve) => hostile.close(resolve));
    }
  },
);
