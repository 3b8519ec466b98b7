// serveNode().close() and attachWebSocketUpgrades().close() end WebSockets the way the peer
// should see it: what was queued to it, then the 1001 close frame; and within
// WEBSOCKET_CLOSE_GRACE_MS even when a peer never answers the close or stopped reading.
// Real sockets on 127.0.0.1.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import process from 'node:process';
import { test } from 'node:test';
import {
  attachWebSocketUpgrades,
  serveNode,
  WEBSOCKET_CLOSE_GRACE_MS,
} from '../../../src/adapters/node.ts';
import {
  acceptingTarget,
  BOUND,
  CLIENT_BOUND_MS,
  countingClient,
  MESSAGE,
  QUEUED,
  queuedMessagesThenCloseFrame,
  sendsAfterCloseBeganAreDropped,
  silentPeer,
  socketQueue,
  within,
} from '../server-close-fixture.ts';

/** Timers the process holds, by the runtime's own count. */
function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
}

test(
  'serveNode: close() with 2 000 messages queued delivers them all, then the 1001 close frame',
  BOUND,
  async () => {
    const timersBefore = activeTimers();
    await queuedMessagesThenCloseFrame(serveNode);
    // The bound's timer went with close(): nothing keeps the process alive.
    assert.equal(activeTimers(), timersBefore);
  },
);

test(
  'serveNode: once close() began, the socket reads as closing and drops what is sent',
  BOUND,
  () => sendsAfterCloseBeganAreDropped(serveNode),
);

test(
  'serveNode: peers that never answer the close, or stopped reading, hold close() no longer ' +
    'than the bound, and leave no timer behind',
  BOUND,
  async () => {
    const timersBefore = activeTimers();
    const sockets = socketQueue();
    const server = await serveNode(acceptingTarget(sockets.accept));
    const mute = await silentPeer(server.port, true);
    await sockets.next();
    const stalled = await silentPeer(server.port, false);
    const stalledSocket = await sockets.next();
    for (let i = 0; i < QUEUED; i++) stalledSocket.send(MESSAGE);
    try {
      const started = performance.now();
      await within(server.close(), WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
      const took = performance.now() - started;
      // It waited for the answer (a peer may take that long) but stopped at the bound.
      assert.ok(took >= WEBSOCKET_CLOSE_GRACE_MS - 50, `close() took ${took} ms`);
      await within(mute.closed, CLIENT_BOUND_MS, 'mute peer dropped');
      // The mute peer got the close frame: opcode 8, code 1001.
      const frames = mute.frames();
      assert.equal(frames[0], 0x88);
      assert.equal(frames.readUInt16BE(2), 1001);
      stalled.destroy();
      await stalled.closed;
      assert.equal(activeTimers(), timersBefore);
    } finally {
      mute.destroy();
      stalled.destroy();
    }
  },
);

test(
  'attachWebSocketUpgrades: close() sends the 1001 close frame after the queued messages',
  BOUND,
  async () => {
    const sockets = socketQueue();
    const server = createServer((_request, response) => response.writeHead(404).end());
    const upgrades = attachWebSocketUpgrades(server, acceptingTarget(sockets.accept));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const client = await countingClient(`http://127.0.0.1:${port}`);
      const socket = await sockets.next();
      for (let i = 0; i < 100; i++) socket.send(MESSAGE);
      await within(upgrades.close(), WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
      const close = await within(client.closed, CLIENT_BOUND_MS, 'client close');
      assert.deepEqual(close, { code: 1001, reason: 'server closing' });
      assert.equal(client.received(), 100);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  },
);
