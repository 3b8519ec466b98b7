// serveBun().close() ends WebSockets the way the peer should see it: what was queued to it,
// then the 1001 close frame; and within WEBSOCKET_CLOSE_GRACE_MS even when a peer stopped
// reading or never answers the close. Real sockets on 127.0.0.1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveBun, WEBSOCKET_CLOSE_GRACE_MS } from '../../../src/adapters/bun.ts';
import {
  acceptingTarget,
  BOUND,
  CLIENT_BOUND_MS,
  MESSAGE,
  QUEUED,
  queuedMessagesThenCloseFrame,
  sendsAfterCloseBeganAreDropped,
  silentPeer,
  socketQueue,
  within,
} from '../server-close-fixture.ts';

test(
  'serveBun: close() with 2 000 messages queued delivers them all, then the 1001 close frame',
  BOUND,
  () => queuedMessagesThenCloseFrame(serveBun),
);

test(
  'serveBun: once close() began, the socket reads as closing and drops what is sent',
  BOUND,
  () => sendsAfterCloseBeganAreDropped(serveBun),
);

test(
  'serveBun: peers that never answer the close, or stopped reading, hold close() no longer ' +
    'than the bound',
  BOUND,
  async () => {
    const sockets = socketQueue();
    const server = await serveBun(acceptingTarget(sockets.accept));
    const mute = await silentPeer(server.port, true);
    await sockets.next();
    const stalled = await silentPeer(server.port, false);
    const stalledSocket = await sockets.next();
    for (let i = 0; i < QUEUED; i++) stalledSocket.send(MESSAGE);
    try {
      const started = performance.now();
      await within(server.close(), WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
      const took = performance.now() - started;
      // It waited for the stalled peer to read (a slow one may take that long), then stopped.
      assert.ok(took >= WEBSOCKET_CLOSE_GRACE_MS - 50, `close() took ${took} ms`);
      await within(mute.closed, CLIENT_BOUND_MS, 'mute peer dropped');
      // The mute peer got the close frame: opcode 8, code 1001.
      const frames = mute.frames();
      assert.equal(frames[0], 0x88);
      assert.equal(frames.readUInt16BE(2), 1001);
      // The stalled one is dropped: once it reads, its connection has ended.
      stalled.resume();
      await within(stalled.closed, CLIENT_BOUND_MS, 'stalled peer dropped');
    } finally {
      mute.destroy();
      stalled.destroy();
    }
  },
);
