import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextMacrotask } from '../../src/core/next-macrotask.ts';
import {
  coalesceFramesPerTurn,
  MAX_HELD_FRAME_BYTES,
} from '../../src/adapters/ws-frame-coalescing.ts';

/** A connection that records what happens to it: held writes, released writes. */
function recordingConnection() {
  const events: string[] = [];
  let corked = 0;
  let held = 0;
  const written: string[] = [];
  const connection = {
    cork() {
      corked++;
      events.push('cork');
    },
    uncork() {
      if (corked === 0) return;
      corked--;
      events.push('uncork');
      if (corked === 0) held = 0;
    },
    get writableLength() {
      return held;
    },
    write(frame: string) {
      written.push(frame);
      if (corked > 0) held += frame.length;
    },
  };
  return { connection, events, written, corkedNow: () => corked };
}

function socketOver(connection: { write(frame: string): void }) {
  return {
    send(frame: string) {
      connection.write(frame);
    },
  };
}

/** Waits, up to 100 turns, until nothing is held; resolves with the turns that took. */
async function released(corkedNow: () => number): Promise<number> {
  for (let turns = 1; turns <= 100; turns++) {
    await nextMacrotask();
    if (corkedNow() === 0) return turns;
  }
  throw new Error('writes still held after 100 turns');
}

test('frames sent in one turn are held from the first and released together after it', async () => {
  const { connection, events, written, corkedNow } = recordingConnection();
  const socket = socketOver(connection);
  assert.equal(coalesceFramesPerTurn(socket, connection), true);
  socket.send('push');
  socket.send('pull');
  await Promise.resolve();
  socket.send('release');
  assert.deepEqual(written, ['push', 'pull', 'release']);
  assert.equal(corkedNow(), 1, 'held until the turn ends');
  assert.deepEqual(events, ['cork']);
  await released(corkedNow);
  assert.deepEqual(events, ['cork', 'uncork']);
  // The next turn holds again, from its own first frame.
  socket.send('push');
  assert.deepEqual(events, ['cork', 'uncork', 'cork']);
  await released(corkedNow);
  assert.deepEqual(events, ['cork', 'uncork', 'cork', 'uncork']);
});

test('a turn that holds MAX_HELD_FRAME_BYTES is written at once, then holds afresh', async () => {
  const { connection, events, corkedNow } = recordingConnection();
  const socket = socketOver(connection);
  coalesceFramesPerTurn(socket, connection);
  socket.send('x'.repeat(MAX_HELD_FRAME_BYTES - 1));
  assert.equal(corkedNow(), 1);
  socket.send('yy');
  assert.equal(corkedNow(), 0, 'released as soon as the limit was reached');
  assert.deepEqual(events, ['cork', 'uncork']);
  socket.send('z');
  assert.deepEqual(events, ['cork', 'uncork', 'cork']);
  await released(corkedNow);
});

test('a frame whose send throws is still released at the end of the turn', async () => {
  const { connection, corkedNow } = recordingConnection();
  const socket = {
    send(_frame: string) {
      throw new Error('WebSocket is not open');
    },
  };
  coalesceFramesPerTurn(socket, connection);
  assert.throws(() => socket.send('push'), /not open/);
  assert.equal(corkedNow(), 1);
  await released(corkedNow);
});

test('a connection that cannot hold writes leaves the socket as it was', () => {
  const socket = socketOver({ write() {} });
  const send = socket.send;
  for (const connection of [undefined, null, {}, { cork() {}, uncork() {} }]) {
    assert.equal(coalesceFramesPerTurn(socket, connection), false);
    assert.equal(socket.send, send);
  }
});
