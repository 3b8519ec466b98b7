// The sockets behind the memory transport behave as the WebSocket standard says where a test can
// tell: events on later tasks, the closing handshake's code and reason at both ends, 1006 for a
// broken connection, InvalidStateError before open, and a refused handshake as a failed one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveWebSocketUpgrader } from '../../src/service/websocket-upgrade.ts';
import { type MemoryFetch, memoryWebSocketFactory } from '../../src/testing/mod.ts';

/** A handler that upgrades every request and echoes each text message back. */
function echoHandler(serverSockets: WebSocket[] = []): MemoryFetch {
  return (request, env) => {
    const upgrader = resolveWebSocketUpgrader(env);
    if (upgrader === undefined) return new Response('no upgrader', { status: 426 });
    return upgrader.upgrade(request, env, (socket) => {
      serverSockets.push(socket);
      socket.addEventListener('message', (event: MessageEvent) => {
        if (event.data === 'close-me') socket.close(4000, 'asked to');
        else socket.send(`echo:${typeof event.data === 'string' ? event.data : 'binary'}`);
      });
    });
  };
}

function nextEvent(socket: WebSocket, type: string): Promise<Event & Record<string, unknown>> {
  return new Promise((resolve) => {
    socket.addEventListener(type, (event) => resolve(event as Event & Record<string, unknown>), {
      once: true,
    });
  });
}

test('A socket opens on a later task, and messages arrive on later tasks, in order', async () => {
  const sockets = memoryWebSocketFactory(echoHandler());
  const socket = sockets.createWebSocket('wss://echo.test/ws');
  assert.equal(socket.readyState, 0);
  assert.throws(() => socket.send('too early'), { name: 'InvalidStateError' });
  await nextEvent(socket, 'open');
  assert.equal(socket.readyState, 1);
  const received: unknown[] = [];
  socket.addEventListener('message', (event: MessageEvent) => received.push(event.data));
  socket.send('a');
  socket.send('b');
  assert.deepEqual(received, [], 'nothing is delivered synchronously');
  while (received.length < 2) await nextEvent(socket, 'message');
  assert.deepEqual(received, ['echo:a', 'echo:b']);
  socket.close();
  assert.equal(sockets.connections[0].url, 'wss://echo.test/ws');
});

test('close(code, reason) reaches the peer, and both ends report it after the handshake', async () => {
  const servers: WebSocket[] = [];
  const sockets = memoryWebSocketFactory(echoHandler(servers));
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(socket, 'open');
  const serverClosed = nextEvent(servers[0], 'close');
  const callerClosed = nextEvent(socket, 'close');
  socket.close(3001, 'done here');
  assert.equal(socket.readyState, 2);
  const [atServer, atCaller] = await Promise.all([serverClosed, callerClosed]);
  assert.deepEqual([atServer.code, atServer.reason, atServer.wasClean], [3001, 'done here', true]);
  assert.deepEqual([atCaller.code, atCaller.reason, atCaller.wasClean], [3001, 'done here', true]);
  assert.equal(socket.readyState, 3);
  assert.deepEqual(await sockets.connections[0].closed, {
    code: 3001,
    reason: 'done here',
    wasClean: true,
  });
  socket.send('after close is discarded, not thrown');
});

test('A peer-initiated close and a close without a code report their codes', async () => {
  const sockets = memoryWebSocketFactory(echoHandler());
  const first = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(first, 'open');
  first.send('close-me');
  const byPeer = await nextEvent(first, 'close');
  assert.deepEqual([byPeer.code, byPeer.reason, byPeer.wasClean], [4000, 'asked to', true]);
  const second = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(second, 'open');
  second.close();
  assert.equal((await nextEvent(second, 'close')).code, 1005);
});

test('close() refuses codes and reasons the standard refuses', async () => {
  const sockets = memoryWebSocketFactory(echoHandler());
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(socket, 'open');
  assert.throws(() => socket.close(1001), { name: 'InvalidAccessError' });
  assert.throws(() => socket.close(2999), { name: 'InvalidAccessError' });
  assert.throws(() => socket.close(1000, 'x'.repeat(124)), { name: 'SyntaxError' });
  // The service's end takes the protocol's own codes, as server sockets do; never 1005 or 1006.
  assert.throws(() => sockets.connections[0].close(1006), { name: 'InvalidAccessError' });
  sockets.connections[0].close(1013, 'try again later');
  const closed = await nextEvent(socket, 'close');
  assert.deepEqual([closed.code, closed.reason], [1013, 'try again later']);
});

test('drop() breaks the connection: both ends report 1006 and what was in flight is lost', async () => {
  const servers: WebSocket[] = [];
  const sockets = memoryWebSocketFactory(echoHandler(servers));
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(socket, 'open');
  let messages = 0;
  socket.addEventListener('message', () => messages++);
  const serverClosed = nextEvent(servers[0], 'close');
  servers[0].send('in flight');
  sockets.connections[0].drop();
  const atCaller = await nextEvent(socket, 'close');
  const atServer = await serverClosed;
  assert.deepEqual([atCaller.code, atCaller.reason, atCaller.wasClean], [1006, '', false]);
  assert.deepEqual([atServer.code, atServer.wasClean], [1006, false]);
  assert.equal(messages, 0);
  assert.equal(sockets.connections[0].state, 'closed');
});

test('A refused handshake fails the socket with error then close 1006; the answer stays readable', async () => {
  const sockets = memoryWebSocketFactory(() => new Response('nope', { status: 403 }));
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  const events: string[] = [];
  socket.addEventListener('open', () => events.push('open'));
  socket.addEventListener('error', () => events.push('error'));
  const closed = nextEvent(socket, 'close');
  assert.equal((await closed).code, 1006);
  assert.deepEqual(events, ['error']);
  const response = await sockets.connections[0].response;
  assert.deepEqual([response.status, await response.text()], [403, 'nope']);
  const throwing = memoryWebSocketFactory(() => {
    throw new Error('handler broke');
  });
  const failed = throwing.createWebSocket('ws://echo.test/ws');
  assert.equal((await nextEvent(failed, 'close')).code, 1006);
  await assert.rejects(throwing.connections[0].response, /handler broke/);
});

test('Binary messages arrive as copies, as ArrayBuffer or Blob per binaryType', async () => {
  const servers: WebSocket[] = [];
  const sockets = memoryWebSocketFactory(echoHandler(servers));
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  await nextEvent(socket, 'open');
  socket.binaryType = 'arraybuffer';
  const bytes = new Uint8Array([1, 2, 3]);
  const arrived = nextEvent(socket, 'message');
  servers[0].send(bytes);
  bytes[0] = 9;
  const data = (await arrived).data;
  assert.ok(data instanceof ArrayBuffer);
  assert.deepEqual([...new Uint8Array(data)], [1, 2, 3]);
  socket.binaryType = 'blob';
  const asBlob = nextEvent(socket, 'message');
  servers[0].send(new Uint8Array([4]).buffer);
  const blob = (await asBlob).data as Blob;
  assert.deepEqual([...new Uint8Array(await blob.arrayBuffer())], [4]);
  socket.close();
});

test('on* handlers work as on a standard socket, and the factory refuses a non-function fetch', async () => {
  const sockets = memoryWebSocketFactory(echoHandler());
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  const opened = new Promise<void>((resolve) => socket.onopen = () => resolve());
  await opened;
  const reply = new Promise<unknown>((resolve) =>
    socket.onmessage = (event) => resolve(event.data)
  );
  socket.send('x');
  assert.equal(await reply, 'echo:x');
  socket.onmessage = null;
  assert.equal(socket.onmessage, null);
  socket.close();
  assert.throws(() => memoryWebSocketFactory('nope' as never), { name: 'SvcConfigurationError' });
  assert.throws(() => memoryWebSocketFactory(echoHandler(), { nope: 1 } as never), {
    name: 'SvcConfigurationError',
  });
  assert.throws(() => sockets.createWebSocket('ftp://echo.test/'), SyntaxError);
});

test('A service that closes as soon as it accepts is seen opening, then closing', async () => {
  const sockets = memoryWebSocketFactory((request, env) =>
    resolveWebSocketUpgrader(env)!.upgrade(request, env, (socket) => socket.close(4001, 'bye'))
  );
  const socket = sockets.createWebSocket('ws://echo.test/ws');
  const events: string[] = [];
  socket.addEventListener('open', () => events.push('open'));
  const closed = await nextEvent(socket, 'close');
  assert.deepEqual(events, ['open']);
  assert.deepEqual([closed.code, closed.reason, closed.wasClean], [4001, 'bye', true]);
});
