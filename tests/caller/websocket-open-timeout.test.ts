// A caller's WebSocket that never finishes opening: a peer that accepted the connection and
// went silent raises no event, so only a limit on the handshake ends it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { disposeAbilitySession } from '../../src/caller/ability-session.ts';
import {
  WEBSOCKET_OPEN_TIMEOUT_MS,
  websocketRpc,
  type WebSocketRpcOptions,
} from '../../src/caller/transports/websocket.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { fakeAbilitySession, fakeRpcEndpoint } from '../support/fake-main.ts';
import { closedWithin, recordSent } from '../support/raw-rpc-socket.ts';

const BOUND = { timeout: 20_000 };
// An open timeout a socket that answers must meet: an in-memory socket opens in a few ms, so this
// leaves it ≥10× slack on a busy machine.
const OPENS_IN_TIME_MS = 1_000;
const RPC_URL = 'ws://fake.test/rpc/fake.echo';

interface EchoApi {
  echo(input: { value: string }): { value: string };
}

function echoSession(options: WebSocketRpcOptions) {
  return fakeAbilitySession<EchoApi>(websocketRpc(RPC_URL, options));
}

/**
 * Sockets that never open first (`silent` of them: their peer never answers the handshake), then
 * sockets connected to the fake main. `silentSends` records whatever was sent on a silent one.
 */
function socketsSilentAtFirst(silent: number) {
  const served = memoryWebSocketFactory(fakeRpcEndpoint().fetch);
  const silentPeer = memoryWebSocketFactory(() => new Promise<Response>(() => {}));
  const silentSends: unknown[] = [];
  const createWebSocket = (url: string): WebSocket => {
    if (silentPeer.connections.length < silent) {
      const socket = silentPeer.createWebSocket(url);
      recordSent(socket, silentSends);
      return socket;
    }
    return served.createWebSocket(url);
  };
  return { createWebSocket, silentSockets: silentPeer.connections, silentSends, served };
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
      // Closing a socket still connecting fails its handshake: it reports 1006 on its next task.
      assert.notEqual(sockets.silentSockets[0].state, 'connecting');
      assert.equal(await closedWithin(sockets.silentSockets[0], 5_000), 1006);
      assert.equal(sockets.silentSockets[0].state, 'closed');
      assert.deepEqual(sockets.silentSends, []);
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
    const session = echoSession({
      createWebSocket: sockets.createWebSocket,
      openTimeoutMs: OPENS_IN_TIME_MS,
    });
    try {
      await assert.rejects(session.echo({ value: 'lost' }));
      assert.deepEqual(await session.echo({ value: 'recovered' }), { value: 'recovered' });
      assert.equal(sockets.silentSockets.length, 1);
      assert.equal(sockets.served.connections.length, 1);
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
    const session = echoSession({
      createWebSocket: sockets.createWebSocket,
      openTimeoutMs: OPENS_IN_TIME_MS,
    });
    try {
      assert.deepEqual(await session.echo({ value: 'first' }), { value: 'first' });
      await new Promise((resolve) => setTimeout(resolve, OPENS_IN_TIME_MS + 100));
      assert.deepEqual(await session.echo({ value: 'second' }), { value: 'second' });
      assert.equal(sockets.served.connections.length, 1);
      assert.equal(sockets.served.connections[0].state, 'open');
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
