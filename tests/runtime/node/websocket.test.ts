import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WebSocket as WsWebSocket } from 'ws';
import { createServer } from 'node:http';
import {
  attachWebSocketUpgrades,
  nodeWebSocketFactory,
  serveNode,
} from '../../../src/adapters/node.ts';
import { svcErrorInfo } from '../../../src/core/errors.ts';
import { abilitySession, disposeAbilitySession } from '../../../src/service/ability-session.ts';
import { httpBatchRpc } from '../../../src/service/transports/http-batch.ts';
import { websocketRpc } from '../../../src/service/transports/websocket.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../../support/fake-main.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const BOUND = { timeout: 60_000 };

function sessionOptions(transport: ReturnType<typeof websocketRpc>) {
  return {
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: [],
    requestToken: () => Promise.resolve(FAKE_TOKEN),
    transport,
    requestId: 'req-node-ws',
  };
}

async function readAll(stream: ReadableStream<{ i: number }>): Promise<number> {
  const reader = stream.getReader();
  let expected = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return expected;
    assert.equal(value.i, expected);
    expected++;
  }
}

test(
  'serveNode: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  async () => {
    const globalBefore = (globalThis as { WebSocket?: unknown }).WebSocket;
    const record = newFakeRecord();
    const server = await serveNode(fakeRpcEndpoint(record));
    const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
      `${server.url}/rpc/fake.echo`,
      { createWebSocket: nodeWebSocketFactory() },
    )));
    try {
      assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.deepEqual(await session.echo({ value: 'over a socket' }), { value: 'over a socket' });
      assert.deepEqual(await session.whoami({}), { transport: 'websocket' });
      assert.equal(await readAll(await session.ticks({ n: 10_000 })), 10_000);
      assert.equal(record.authenticated.length, 1);
      assert.equal(record.sessions.length, 1);
      assert.equal(record.sessions[0].query.request_id, 'req-node-ws');
      assert.equal((globalThis as { WebSocket?: unknown }).WebSocket, globalBefore);
    } finally {
      disposeAbilitySession(session);
      await server.close();
    }
  },
);

test(
  'serveNode: HTTP-batch over a real socket pipelines authenticate with the call',
  BOUND,
  async () => {
    const record = newFakeRecord();
    const endpoint = fakeRpcEndpoint(record);
    const server = await serveNode(endpoint);
    const session = abilitySession<FakeApi>({
      ...sessionOptions(websocketRpc('ws://unused.invalid/')),
      transport: httpBatchRpc(`${server.url}/rpc/fake.echo`),
    });
    try {
      assert.deepEqual(await session.echo({ value: 'batch' }), { value: 'batch' });
      assert.equal(endpoint.requests.length, 1);
      assert.equal(record.sessions[0].headers['x-request-id'], 'req-node-ws');
    } finally {
      disposeAbilitySession(session);
      await server.close();
    }
  },
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
  async () => {
    const server = await serveNode(
      fakeRpcEndpoint(newFakeRecord(), { transports: ['http-batch'] }),
    );
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const socket = new WsWebSocket(`${server.url.replace('http', 'ws')}/rpc/fake.echo`);
        socket.on('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          response.resume();
          socket.terminate();
        });
        socket.on('open', () => reject(new Error('the upgrade was accepted')));
        socket.on('error', () => {});
      });
      assert.equal(status, 405);

      const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
        `${server.url}/rpc/fake.echo`,
        { createWebSocket: nodeWebSocketFactory() },
      )));
      try {
        await assert.rejects(session.echo({ value: 'refused' }));
      } finally {
        disposeAbilitySession(session);
      }
    } finally {
      await server.close();
    }
  },
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
      assert.match(closed.reason, /depth/);
      assert.deepEqual(record.calls, []);

      const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
        `${server.url}/rpc/fake.echo`,
        { createWebSocket: nodeWebSocketFactory() },
      )));
      try {
        assert.deepEqual(await session.echo({ value: 'healthy' }), { value: 'healthy' });
      } finally {
        disposeAbilitySession(session);
      }
    } finally {
      await server.close();
    }
  },
);

test('serveNode: a session sees the server going away as an error, not a hang', BOUND, async () => {
  const server = await serveNode(fakeRpcEndpoint());
  const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
    `${server.url}/rpc/fake.echo`,
    { createWebSocket: nodeWebSocketFactory() },
  )));
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
    const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
      `ws://127.0.0.1:${port}/rpc/fake.echo`,
      { createWebSocket: nodeWebSocketFactory() },
    )));
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

      const session = abilitySession<FakeApi>(sessionOptions(websocketRpc(
        `${server.url}/rpc/fake.echo`,
        { createWebSocket: nodeWebSocketFactory() },
      )));
      try {
        assert.deepEqual(await session.echo({ value: 'healthy' }), { value: 'healthy' });
      } finally {
        disposeAbilitySession(session);
      }
    } finally {
      await server.close();
    }
  },
);
