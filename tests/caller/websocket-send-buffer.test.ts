// A peer that stops reading: what waits unsent on a socket is bounded, and past the bound the
// connection ends with 1013 instead of this process buffering for as long as the peer stays.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import {
  MAX_WEBSOCKET_SEND_BUFFER_BYTES,
  SEND_BUFFER_FULL_CLOSE,
  WebSocketRpcTransport,
} from '../../src/service/websocket-rpc-transport.ts';

type Listener = (event: unknown) => void;

/** A socket whose peer never reads: everything sent stays in `bufferedAmount`. */
class UnreadSocket {
  readyState: number;
  bufferedAmount = 0;
  sent: string[] = [];
  closes: { code?: number; reason?: string }[] = [];
  #listeners = new Map<string, Listener[]>();

  constructor(readyState = 1) {
    this.readyState = readyState;
  }

  addEventListener(type: string, listener: Listener): void {
    this.#listeners.set(type, [...(this.#listeners.get(type) ?? []), listener]);
  }

  send(data: string): void {
    this.sent.push(data);
    this.bufferedAmount += data.length;
  }

  close(code?: number, reason?: string): void {
    this.closes.push({ code, reason });
    this.readyState = 2;
  }

  open(): void {
    this.readyState = 1;
    for (const listener of this.#listeners.get('open') ?? []) listener({});
  }
}

/** A socket that reports no send buffer at all (as on Workers). */
class UnreportingSocket extends UnreadSocket {
  constructor() {
    super();
    Reflect.deleteProperty(this, 'bufferedAmount');
  }

  override send(data: string): void {
    this.sent.push(data);
  }
}

const SEND_BUFFER_FULL = {
  code: 'internal',
  status: 503,
  retryable: true,
  reason: 'send_buffer_full',
};

test('a socket holding more than maxBufferedBytes unsent is closed with 1013 and fails', async () => {
  const socket = new UnreadSocket();
  const transport = new WebSocketRpcTransport(socket, { maxBufferedBytes: 100 });
  transport.send('a'.repeat(60));
  transport.send('b'.repeat(40));
  assert.deepEqual(socket.closes, [], 'exactly at the limit is still within it');
  transport.send('c');
  assert.deepEqual(socket.closes, [SEND_BUFFER_FULL_CLOSE]);
  assert.equal(SEND_BUFFER_FULL_CLOSE.code, 1013);
  const error = await transport.receive().catch((caught) => caught);
  assert.deepEqual(svcErrorInfo(error), SEND_BUFFER_FULL);
  transport.send('after the close');
  assert.equal(socket.sent.length, 3, 'nothing is sent once the transport failed');
});

test('the send buffer limit defaults to MAX_WEBSOCKET_SEND_BUFFER_BYTES (64 MiB)', () => {
  assert.equal(MAX_WEBSOCKET_SEND_BUFFER_BYTES, 64 * 1024 * 1024);
  const socket = new UnreadSocket();
  const transport = new WebSocketRpcTransport(socket);
  socket.bufferedAmount = MAX_WEBSOCKET_SEND_BUFFER_BYTES - 1;
  transport.send('x');
  assert.deepEqual(socket.closes, []);
  transport.send('y');
  assert.deepEqual(socket.closes, [SEND_BUFFER_FULL_CLOSE]);
});

test('messages queued while connecting are checked against the limit once flushed', async () => {
  const socket = new UnreadSocket(0);
  const transport = new WebSocketRpcTransport(socket, { maxBufferedBytes: 10 });
  for (let i = 0; i < 4; i++) transport.send('12345');
  assert.deepEqual(socket.sent, [], 'nothing leaves before the socket opens');
  socket.open();
  assert.equal(socket.sent.length, 4);
  assert.deepEqual(socket.closes, [SEND_BUFFER_FULL_CLOSE]);
  const error = await transport.receive().catch((caught) => caught);
  assert.deepEqual(svcErrorInfo(error), SEND_BUFFER_FULL);
});

test('a socket that reports no send buffer is never closed for it', () => {
  const socket = new UnreportingSocket();
  assert.equal('bufferedAmount' in socket, false);
  const transport = new WebSocketRpcTransport(socket, { maxBufferedBytes: 1 });
  for (let i = 0; i < 100; i++) transport.send('unbounded here; the runtime applies its own');
  assert.equal(socket.sent.length, 100);
  assert.deepEqual(socket.closes, []);
});
