import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket as WsWebSocket } from 'ws';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import {
  attachWebSocketUpgrades,
  nodeWebSocketFactory,
  serveNode,
} from '../../../src/adapters/node.ts';
import { svcErrorInfo } from '../../../src/core/errors.ts';
import { disposeAbilitySession } from '../../../src/caller/ability-session.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../../support/fake-main.ts';
import {
  assertEchoesOverWebSocket,
  fakeWebSocketSession,
  rawUpgradeRequest,
  servedAfterSilentHandshake,
  servedBatchPipelines,
  servedHandshakeKeepsEveryCookie,
  servedNoSubprotocolAgreed,
  servedSessionStreams,
  servedSlowReaderClosed,
  servedThrowingTargetAnswersBare500,
  servedUpgradeRefused,
  servedWrongPathRefused,
  type WebSocketServingRuntime,
} from '../websocket-scenarios.ts';

const BOUND = { timeout: 60_000 };
const RUNTIME: WebSocketServingRuntime = {
  serve: serveNode,
  requestId: 'req-node-ws',
  createWebSocket: nodeWebSocketFactory(),
};

test(
  'serveNode: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  () => servedSessionStreams(RUNTIME),
);

test(
  'serveNode: HTTP-batch over a real socket pipelines authenticate with the call',
  BOUND,
  () => servedBatchPipelines(RUNTIME),
);

test('serveNode: the handshake carries the target response headers', BOUND, async () => {
  const endpoint = fakeRpcEndpoint();
  const server = await serveNode({
    async fetch(request, env) {
      const response = await endpoint.fetch(request, env);
      response.headers.set('X-Request-Id', 'echoed-id');
      return response;
    },
  });
  try {
    const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const socket = new WsWebSocket(`${server.url.replace('http', 'ws')}/rpc/fake.echo`);
      socket.on('upgrade', (response) => resolve(response.headers));
      socket.on('open', () => socket.close());
      socket.on('error', reject);
    });
    assert.equal(headers['x-request-id'], 'echoed-id');
  } finally {
    await server.close();
  }
});

test(
  'serveNode: an upgrade to an ability without WebSocket is refused with its 405',
  BOUND,
  () =>
    servedUpgradeRefused(RUNTIME, async (url) => {
      const status = await new Promise<number>((resolve, reject) => {
        const socket = new WsWebSocket(`${url.replace('http', 'ws')}/rpc/fake.echo`);
        socket.on('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          response.resume();
          socket.terminate();
        });
        socket.on('open', () => reject(new Error('the upgrade was accepted')));
        socket.on('error', () => {});
      });
      assert.equal(status, 405);
    }),
);

test(
  'DOS-04 over WebSocket: a 300-deep argument closes that session, the server stays healthy',
  BOUND,
  async () => {
    const record = newFakeRecord();
    const server = await serveNode(fakeRpcEndpoint(record));
    try {
      const closed = await new Promise<{ code: number; reason: string }>((resolve, reject) => {
        const socket = new WsWebSocket(`${server.url.replace('http', 'ws')}/rpc/fake.echo`);
        socket.on('open', () => {
          const nested = '{"a":'.repeat(300) + '1' + '}'.repeat(300);
          socket.send(`["push",["pipeline",0,["authenticate"],[${JSON.stringify(FAKE_TOKEN)}]]]`);
          socket.send(`["push",["pipeline",1,["echo"],[${nested}]]]`);
          socket.send('["pull",2]');
        });
        socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
        socket.on('error', reject);
      });
      assert.equal(closed.code, 3000);
      // Cap'n Web's own text stays on the server: the close frame says only that it aborted.
      assert.equal(closed.reason, 'RPC session aborted');
      assert.deepEqual(record.calls, []);

      await assertEchoesOverWebSocket(`${server.url}/rpc/fake.echo`, RUNTIME, 'healthy');
    } finally {
      await server.close();
    }
  },
);

test('serveNode: a session sees the server going away as an error, not a hang', BOUND, async () => {
  const server = await serveNode(fakeRpcEndpoint());
  const session = fakeWebSocketSession(`${server.url}/rpc/fake.echo`, RUNTIME);
  try {
    assert.deepEqual(await session.echo({ value: 'up' }), { value: 'up' });
    await server.close();
    const error = await session.echo({ value: 'down' }).catch((caught) => caught);
    assert.ok(error instanceof Error);
    assert.equal(svcErrorInfo(error).code, 'internal');
  } finally {
    disposeAbilitySession(session);
    await server.close();
  }
});

test(
  'attachWebSocketUpgrades: an existing http.Server serves WebSocket sessions',
  BOUND,
  async () => {
    const record = newFakeRecord();
    const server = createServer((_request, response) => response.writeHead(404).end());
    const upgrades = attachWebSocketUpgrades(server, fakeRpcEndpoint(record), {
      env: { marker: 'user env' },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const session = fakeWebSocketSession(`ws://127.0.0.1:${port}/rpc/fake.echo`, RUNTIME);
    try {
      assert.deepEqual(await session.whoami({}), { transport: 'websocket' });
      assert.equal(record.sessions.length, 1);
    } finally {
      disposeAbilitySession(session);
      upgrades.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  },
);

test(
  'DOS-05 over WebSocket: a 40 MiB message closes that socket, the server stays healthy',
  BOUND,
  async () => {
    const record = newFakeRecord();
    const server = await serveNode(fakeRpcEndpoint(record));
    try {
      const code = await new Promise<number>((resolve, reject) => {
        const socket = new WsWebSocket(`${server.url.replace('http', 'ws')}/rpc/fake.echo`);
        socket.on('open', () => socket.send('x'.repeat(40 * 1024 * 1024)));
        socket.on('close', (closeCode) => resolve(closeCode));
        socket.on('error', () => {});
        setTimeout(() => reject(new Error('the socket was not closed')), 20_000).unref();
      });
      assert.equal(code, 1009);
      assert.deepEqual(record.calls, []);

      await assertEchoesOverWebSocket(`${server.url}/rpc/fake.echo`, RUNTIME, 'healthy');
    } finally {
      await server.close();
    }
  },
);

test(
  'serveNode: close() ends a connection whose upgrade the target is still deciding',
  BOUND,
  async () => {
    let reached!: () => void;
    const targetReached = new Promise<void>((resolve) => (reached = resolve));
    let decide!: () => void;
    const decided = new Promise<void>((resolve) => (decide = resolve));
    const server = await serveNode({
      async fetch() {
        reached();
        await decided;
        return new Response('too late', { status: 403 });
      },
    });
    const socket = connect(server.port, '127.0.0.1');
    const socketClosed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    try {
      socket.write(rawUpgradeRequest('/rpc/fake.echo'));
      await targetReached;
      const outcome = await Promise.race([
        server.close().then(() => 'closed'),
        new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 10_000).unref()),
      ]);
      assert.equal(outcome, 'closed');
      await socketClosed;
    } finally {
      decide();
      socket.destroy();
      await server.close();
    }
  },
);

test(
  'serveNode: a session whose first handshake never completes opens a fresh socket',
  BOUND,
  () => servedAfterSilentHandshake(RUNTIME),
);

test(
  'serveNode: a peer that stops reading is closed with 1013 once the send buffer passes its limit',
  BOUND,
  () => servedSlowReaderClosed(RUNTIME),
);

test(
  'serveNode: every Set-Cookie of the target rides on the 101',
  BOUND,
  () => servedHandshakeKeepsEveryCookie(RUNTIME),
);

test(
  'serveNode: a client offering subprotocols is agreed none',
  BOUND,
  () => servedNoSubprotocolAgreed(RUNTIME),
);

test(
  'serveNode: a target that throws is a bare 500',
  BOUND,
  () => servedThrowingTargetAnswersBare500(RUNTIME),
);

test(
  'serveNode: a WebSocket to a wrong path fails with 404 and its URL, not retryable',
  BOUND,
  () => servedWrongPathRefused(RUNTIME),
);
