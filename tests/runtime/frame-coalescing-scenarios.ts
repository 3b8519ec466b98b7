// What the `ws` adapters' frame coalescing tests share (tests/runtime/<runtime>/
// frame-coalescing.test.ts): frames a socket sends in one turn reach its connection in one write,
// in order, on a real socket on 127.0.0.1.
import assert from 'node:assert/strict';
import type { FetchTarget, ServedServer } from '../../src/adapters/serve-target.ts';
import { MAX_HELD_FRAME_BYTES } from '../../src/adapters/ws-frame-coalescing.ts';
import { nextMacrotask } from '../../src/core/next-macrotask.ts';
import { acceptingTarget, socketQueue, within } from './server-close-fixture.ts';

/** Bound of each test. */
export const BOUND = { timeout: 30_000 };

/** A serving helper under test. */
export type Serve = (target: FetchTarget) => Promise<ServedServer>;

/** The writes a Node-style connection hands to the operating system, one entry per write. */
interface WriteCounting {
  _write?: (...args: unknown[]) => unknown;
  _writev?: (...args: unknown[]) => unknown;
}

/** Counts `connection`'s writes from now on: one per `_write` or `_writev` it makes. */
function countWrites(connection: WriteCounting): () => number {
  let writes = 0;
  for (const name of ['_write', '_writev'] as const) {
    const original = connection[name];
    if (typeof original !== 'function') continue;
    connection[name] = function (this: unknown, ...args: unknown[]) {
      writes++;
      return original.apply(this, args);
    };
  }
  return () => writes;
}

/** Waits, up to 100 turns, until `done()`. */
async function turnsUntil(done: () => boolean, what: string): Promise<void> {
  for (let turns = 0; turns < 100; turns++) {
    if (done()) return;
    await nextMacrotask();
  }
  throw new Error(`${what}: not after 100 turns`);
}

/** Messages a socket received, in order, and a wait for the n-th. */
function receivedBy(socket: WebSocket) {
  const messages: string[] = [];
  const waiting: { count: number; resolve(): void }[] = [];
  socket.addEventListener('message', (event) => {
    messages.push(String(event.data));
    for (const wait of [...waiting]) {
      if (messages.length >= wait.count) {
        waiting.splice(waiting.indexOf(wait), 1);
        wait.resolve();
      }
    }
  });
  return {
    messages,
    atLeast(count: number): Promise<void> {
      if (messages.length >= count) return Promise.resolve();
      return within(new Promise((resolve) => waiting.push({ count, resolve })), 10_000, 'messages');
    },
  };
}

async function opened(socket: WebSocket): Promise<void> {
  if (socket.readyState === 1) return;
  await within(
    new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve());
      socket.addEventListener('error', () => reject(new Error('client socket failed')));
    }),
    10_000,
    'client open',
  );
}

/**
 * A server from `serve` accepting every upgrade, a client from `createWebSocket` (handed to
 * `beforeOpen` first), both open, and the server's end of the connection.
 */
async function openedPair(
  serve: Serve,
  createWebSocket: (url: string) => WebSocket,
  beforeOpen?: (client: WebSocket) => void,
) {
  const sockets = socketQueue();
  const server = await serve(acceptingTarget(sockets.accept));
  const client = createWebSocket(server.url.replace('http', 'ws'));
  beforeOpen?.(client);
  try {
    await opened(client);
    const serverSocket = await within(sockets.next(), 10_000, 'server socket');
    return { server, client, serverSocket };
  } catch (error) {
    client.close();
    await server.close();
    throw error;
  }
}

/**
 * A client from `createWebSocket` (the adapter's `ws` factory): three frames sent in one turn
 * leave in one write after the turn, and the server receives them in order; a frame of
 * {@link MAX_HELD_FRAME_BYTES} or more is written without waiting for the turn to end.
 */
export async function clientFramesOfOneTurnLeaveInOneWrite(
  serve: Serve,
  createWebSocket: (url: string) => WebSocket,
): Promise<void> {
  let writes: (() => number) | undefined;
  const { server, client, serverSocket } = await openedPair(serve, createWebSocket, (client) => {
    (client as unknown as { once(event: string, listener: (response: unknown) => void): void })
      .once('upgrade', (response) => {
        writes = countWrites((response as { socket: WriteCounting }).socket);
      });
  });
  try {
    const received = receivedBy(serverSocket);
    assert.ok(writes !== undefined, 'the upgrade response carries the connection');
    const before = writes();
    client.send('push');
    client.send('pull');
    await Promise.resolve();
    client.send('release');
    assert.equal(writes() - before, 0, 'held while the turn runs');
    await turnsUntil(() => writes!() > before, 'the held frames written');
    assert.equal(writes() - before, 1, 'three frames, one write');
    await received.atLeast(3);
    assert.deepEqual(received.messages, ['push', 'pull', 'release']);

    const large = 'x'.repeat(MAX_HELD_FRAME_BYTES);
    const beforeLarge = writes();
    client.send(large);
    assert.ok(writes() > beforeLarge, 'a large frame is written within its turn');
    await received.atLeast(4);
    assert.equal(received.messages[3].length, large.length);
  } finally {
    client.close();
    await server.close();
  }
}

/**
 * The serving helper's server socket (Node: `ws` over `node:http`): three frames sent in one
 * turn leave in one write after it, and the client receives them in order.
 */
export async function serverFramesOfOneTurnLeaveInOneWrite(
  serve: Serve,
  createWebSocket: (url: string) => WebSocket,
): Promise<void> {
  const { server, client, serverSocket } = await openedPair(serve, createWebSocket);
  try {
    const received = receivedBy(client);
    // The connection under the server's `ws` socket (a private member of `ws`).
    const connection = (serverSocket as unknown as { _socket: WriteCounting })._socket;
    const writes = countWrites(connection);
    serverSocket.send('resolve 1');
    serverSocket.send('resolve 2');
    await Promise.resolve();
    serverSocket.send('resolve 3');
    assert.equal(writes(), 0, 'held while the turn runs');
    await turnsUntil(() => writes() > 0, 'the held frames written');
    assert.equal(writes(), 1, 'three frames, one write');
    await received.atLeast(3);
    assert.deepEqual(received.messages, ['resolve 1', 'resolve 2', 'resolve 3']);
  } finally {
    client.close();
    await server.close();
  }
}
