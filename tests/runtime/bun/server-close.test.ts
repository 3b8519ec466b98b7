// serveBun().close() ends WebSockets the way the peer should see it: what was queued to it,
// then the 1001 close frame; and within WEBSOCKET_CLOSE_GRACE_MS even when a peer stopped
// reading or never answers the close. Real sockets on 127.0.0.1.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { WebSocket as WsWebSocket } from 'ws';
import { serveBun, WEBSOCKET_CLOSE_GRACE_MS } from '../../../src/adapters/bun.ts';
import type { FetchTarget } from '../../../src/adapters/serve-target.ts';
import { resolveWebSocketUpgrader } from '../../../src/service/websocket-upgrade.ts';
import { rawUpgradeRequest } from '../websocket-scenarios.ts';

const BOUND = { timeout: 30_000 };

/** Messages queued to the peer when the server closes, and the size of each. */
const QUEUED = 2_000;
const MESSAGE = 'x'.repeat(10_000);

/** Longest a client waits for its connection to end once the server closed. */
const CLIENT_BOUND_MS = 5_000;

/** A target that accepts every upgrade and hands the server socket to `accepted`. */
function acceptingTarget(accepted: (socket: WebSocket) => void): FetchTarget {
  return {
    fetch(request, env) {
      const upgrader = resolveWebSocketUpgrader(env);
      if (upgrader === undefined) return new Response(null, { status: 500 });
      return upgrader.upgrade(request, env, accepted);
    },
  };
}

/** Server sockets in the order they open, each awaited by index. */
function socketQueue() {
  const sockets: WebSocket[] = [];
  const waiting: ((socket: WebSocket) => void)[] = [];
  return {
    accept(socket: WebSocket) {
      const next = waiting.shift();
      if (next !== undefined) next(socket);
      else sockets.push(socket);
    },
    next(): Promise<WebSocket> {
      const ready = sockets.shift();
      return ready !== undefined
        ? Promise.resolve(ready)
        : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** Resolves with `promise`, or rejects once `ms` passed. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A `ws` client counting what it receives and reporting how it was closed. */
async function countingClient(url: string) {
  const client = new WsWebSocket(url.replace('http', 'ws'), { perMessageDeflate: false });
  let received = 0;
  client.on('message', () => received++);
  client.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    client.on('close', (code, reason) => resolve({ code, reason: String(reason) }));
  });
  await new Promise((resolve, reject) => client.once('open', resolve).once('error', reject));
  return { closed, received: () => received };
}

/**
 * A raw TCP peer that upgrades and then never writes again: not even the answer to a close
 * frame. `reading` false also stops it reading once upgraded.
 */
async function silentPeer(port: number, reading: boolean) {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  let bytes = Buffer.alloc(0);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(rawUpgradeRequest('/'));
  await new Promise<void>((resolve) => {
    socket.on('data', (data: Buffer) => {
      bytes = Buffer.concat([bytes, data]);
      if (bytes.includes('\r\n\r\n')) resolve();
    });
  });
  if (!reading) socket.pause();
  return {
    closed,
    /** What arrived after the 101's head. */
    frames: () => bytes.subarray(bytes.indexOf('\r\n\r\n') + 4),
    resume: () => socket.resume(),
    destroy: () => socket.destroy(),
  };
}

test(
  'serveBun: close() with 2 000 messages queued delivers them all, then the 1001 close frame',
  BOUND,
  async () => {
    const sockets = socketQueue();
    const server = await serveBun(acceptingTarget(sockets.accept));
    const client = await countingClient(server.url);
    const socket = await sockets.next();
    for (let i = 0; i < QUEUED; i++) socket.send(MESSAGE);
    const started = performance.now();
    await within(server.close(), WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
    // The peer read everything: close() did not wait out the bound.
    assert.ok(performance.now() - started < WEBSOCKET_CLOSE_GRACE_MS);
    const close = await within(client.closed, CLIENT_BOUND_MS, 'client close');
    assert.deepEqual(close, { code: 1001, reason: 'server closing' });
    assert.equal(client.received(), QUEUED);
  },
);

test(
  'serveBun: once close() began, the socket reads as closing and drops what is sent',
  BOUND,
  async () => {
    const sockets = socketQueue();
    const server = await serveBun(acceptingTarget(sockets.accept));
    const client = await countingClient(server.url);
    const socket = await sockets.next();
    for (let i = 0; i < QUEUED; i++) socket.send(MESSAGE);
    const closing = server.close();
    // A session still sending (a stream) would keep the buffer from draining: past this point
    // nothing more is queued, and the close frame follows what was.
    assert.equal(socket.readyState, 2);
    socket.send('after close() began');
    await within(closing, WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
    const close = await within(client.closed, CLIENT_BOUND_MS, 'client close');
    assert.deepEqual(close, { code: 1001, reason: 'server closing' });
    assert.equal(client.received(), QUEUED);
    assert.equal(socket.readyState, 3);
  },
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
