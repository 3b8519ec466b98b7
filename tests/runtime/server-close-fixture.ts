// What the serving helpers' close() tests share (tests/runtime/<runtime>/server-close.test.ts):
// a target accepting every upgrade, server sockets in order, a counting ws client, a raw peer
// that never answers, and a bounded wait. Real sockets on 127.0.0.1.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { WebSocket as WsWebSocket } from 'ws';
import type { FetchTarget, ServedServer } from '../../src/adapters/serve-target.ts';
import { WEBSOCKET_CLOSE_GRACE_MS } from '../../src/adapters/websocket-close-grace.ts';
import { resolveWebSocketUpgrader } from '../../src/service/websocket-upgrade.ts';
import { rawUpgradeRequest } from './websocket-scenarios.ts';
import { recordFiredTimers } from '../support/wall-clock.ts';

/** Bound of each close() test. */
export const BOUND = { timeout: 30_000 };

/** Messages queued to the peer when the server closes, and the size of each. */
export const QUEUED = 2_000;
/** One queued message. */
export const MESSAGE = 'x'.repeat(10_000);

/** Longest a client waits for its connection to end once the server closed. */
export const CLIENT_BOUND_MS = 5_000;

/** A target that accepts every upgrade and hands the server socket to `accepted`. */
export function acceptingTarget(accepted: (socket: WebSocket) => void): FetchTarget {
  return {
    fetch(request, env) {
      const upgrader = resolveWebSocketUpgrader(env);
      if (upgrader === undefined) return new Response(null, { status: 500 });
      return upgrader.upgrade(request, env, accepted);
    },
  };
}

/** Server sockets in the order they open, each awaited by index. */
export function socketQueue() {
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
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
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
export async function countingClient(url: string) {
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
export async function silentPeer(port: number, reading: boolean) {
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

/** A serving helper under test (`serveNode`, `serveBun`). */
export type ServeForClose = (target: FetchTarget) => Promise<ServedServer>;

/**
 * 2 000 messages queued to a reading peer, then `close()`: the peer gets them all and then the
 * 1001 close frame, and `close()` does not wait out its bound.
 */
export async function queuedMessagesThenCloseFrame(serve: ServeForClose): Promise<void> {
  const sockets = socketQueue();
  const server = await serve(acceptingTarget(sockets.accept));
  const client = await countingClient(server.url);
  const socket = await sockets.next();
  for (let i = 0; i < QUEUED; i++) socket.send(MESSAGE);
  // The peer read everything and answered the close: close() did not wait out the bound. Read
  // from whether the bound's timer fired, not from the clock, which a busy machine stretches.
  const timers = recordFiredTimers();
  try {
    await within(server.close(), WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
  } finally {
    timers.restore();
  }
  assert.ok(
    !timers.delays.includes(WEBSOCKET_CLOSE_GRACE_MS),
    `timers fired during close(): ${timers.delays.join(', ')}`,
  );
  const close = await within(client.closed, CLIENT_BOUND_MS, 'client close');
  assert.deepEqual(close, { code: 1001, reason: 'server closing' });
  assert.equal(client.received(), QUEUED);
}

/**
 * Once `close()` began, the server socket reads as closing and drops what a session still sends,
 * so a stream cannot keep the buffer from draining; the close frame follows what was queued.
 */
export async function sendsAfterCloseBeganAreDropped(serve: ServeForClose): Promise<void> {
  const sockets = socketQueue();
  const server = await serve(acceptingTarget(sockets.accept));
  const client = await countingClient(server.url);
  const socket = await sockets.next();
  for (let i = 0; i < QUEUED; i++) socket.send(MESSAGE);
  const closing = server.close();
  assert.equal(socket.readyState, 2);
  socket.send('after close() began');
  await within(closing, WEBSOCKET_CLOSE_GRACE_MS + 2_000, 'close()');
  const close = await within(client.closed, CLIENT_BOUND_MS, 'client close');
  assert.deepEqual(close, { code: 1001, reason: 'server closing' });
  assert.equal(client.received(), QUEUED);
  assert.equal(socket.readyState, 3);
}
