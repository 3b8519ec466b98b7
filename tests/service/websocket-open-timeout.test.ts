// A caller's WebSocket that never finishes opening: a peer that accepted the connection and
// went silent raises no event, so only a limit on the handshake ends it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { disposeAbilitySession } from '../../src/service/ability-session.ts';
import {
  WEBSOCKET_OPEN_TIMEOUT_MS,
  websocketRpc,
  type WebSocketRpcOptions,
} from '../../src/service/transports/websocket.ts';
import { fakeAbilitySession, fakeRpcEndpoint } from '../support/fake-main.ts';
import { MemoryWebSocket, memoryWebSocketFactory } from '../support/memory-websocket.ts';

const BOUND = { timeout: 20_000 };
const RPC_URL = 'ws://fake.test/rpc/fake.echo';

interface EchoApi {
  echo(input: { value: string }): { value: string };
}

function echoSession(options: WebSocketRpcOptions) {
  return fakeAbilitySession<EchoApi>(websocketRpc(RPC_URL, options));
}

/** Sockets that never open first (`silent` of them), then sockets connected to the fake main. */
function socketsSilentAtFirst(silent: number) {
  const served = memoryWebSocketFactory(fakeRpcEndpoint().fetch);
  const silentSockets: MemoryWebSocket[] = [];
  const createWebSocket = (url: string): WebSocket => {
    if (silentSockets.length < silent) {
      const socket = new MemoryWebSocket();
      silentSockets.push(socket);
      return socket as unknown as WebSocket;
    }
    return served.createWebSocket(url);
  };
  return { createWebSocket, silentSockets, served };
}

test(
  'websocketRpc: a socket still connecting past openTimeoutMs is closed and the call fails',
  BOUND,
  async () => {
    const sockets = socketsSilentAtFirst(1);
    const session = echoSession({ createWebSocket: sockets.createWebSocket, openTimeoutMs: 50 });
    try {
      const error = await session.echo({ value: 'never sent' }).catch((caught) => caught);
      assert.ok(error instanceof Error);
      assert.equal(sockets.silentSockets[0].readyState, 3);
      assert.deepEqual(sockets.silentSockets[0].sent, []);
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test(
  'websocketRpc: after a handshake that never completed, the next call opens a fresh socket',
  BOUND,
  async () => {
    const sockets = socketsSilentAtFirst(1);
    const session = echoSession({ createWebSocket: sockets.createWebSocket, openTimeoutMs: 50 });
    try {
      await assert.rejects(session.echo({ value: 'lost' }));
      assert.deepEqual(await session.echo({ value: 'recovered' }), { value: 'recovered' });
      assert.equal(sockets.silentSockets.length, 1);
      assert.equal(sockets.served.urls.length, 1);
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test(
  'websocketRpc: a socket that opened in time stays in use once openTimeoutMs has passed',
  BOUND,
  async () => {
    const sockets = socketsSilentAtFirst(0);
    const session = echoSession({ createWebSocket: sockets.createWebSocket, openTimeoutMs: 20 });
    try {
      assert.deepEqual(await session.echo({ value: 'first' }), { value: 'first' });
      await new Promise((resolve) => setTimeout(resolve, 60));
      assert.deepEqual(await session.echo({ value: 'second' }), { value: 'second' });
      assert.equal(sockets.served.urls.length, 1);
      assert.equal(sockets.served.sockets[0].readyState, 1);
    } finally {
      disposeAbilitySession(session);
    }
  },
);

test('websocketRpc: openTimeoutMs is a positive timer delay; the default is WEBSOCKET_OPEN_TIMEOUT_MS', () => {
  assert.equal(WEBSOCKET_OPEN_TIMEOUT_MS, 10_000);
  for (const openTimeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
    assert.throws(
      () => websocketRpc(RPC_URL, { openTimeoutMs }),
      SvcConfigurationError,
      String(openTimeoutMs),
    );
  }
});
