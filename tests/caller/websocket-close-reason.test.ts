// What a WebSocket close frame tells the peer when a session aborts: the message of this
// system's own errors, written for the peer; for anything else (a parser's text, Cap'n Web's
// own, which may quote internals or the peer's input) only that the session aborted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CapabilityAuthError, SvcInternalError } from '../../src/core/errors.ts';
import {
  MESSAGE_TOO_BIG_CLOSE_CODE,
  WebSocketRpcTransport,
} from '../../src/service/websocket-rpc-transport.ts';

/** An open socket that records how it was closed. */
function recordingSocket() {
  const closes: { code?: number; reason?: string }[] = [];
  return {
    closes,
    socket: {
      readyState: 1,
      send() {},
      close(code?: number, reason?: string) {
        closes.push({ code, reason });
      },
      addEventListener() {},
    },
  };
}

function closeAfterAbort(reason: unknown) {
  const { socket, closes } = recordingSocket();
  const transport = new WebSocketRpcTransport(socket, { receiver: 'service' });
  transport.receive().catch(() => {});
  transport.abort(reason);
  assert.equal(closes.length, 1);
  return closes[0];
}

test('an abort for a foreign error closes with an opaque reason, never its text', () => {
  const foreign = [
    new SyntaxError('Unexpected token o in JSON at position 1 (/srv/app/secret-path.js)'),
    new Error('no such export ID: 12345'),
    'bad RPC message: ["pull",{"a":1}]',
    undefined,
  ];
  for (const reason of foreign) {
    assert.deepEqual(closeAfterAbort(reason), { code: 3000, reason: 'RPC session aborted' });
  }
});

test("an abort for one of this system's errors closes with its message, within 123 bytes", () => {
  const refused = new SvcInternalError('RPC session holds too many calls', {
    status: 413,
    reason: 'rpc_session_too_large',
  });
  assert.deepEqual(closeAfterAbort(refused), {
    code: 3000,
    reason: 'RPC session holds too many calls',
  });
  const long = new CapabilityAuthError('é'.repeat(100), { status: 401, reason: 'x' });
  const { reason } = closeAfterAbort(long);
  assert.equal(reason, 'é'.repeat(61), 'cut at a character boundary within 123 bytes');
});

/** An open caller socket whose listeners a test can fire. */
function listenedSocket() {
  const listeners = new Map<string, ((event: Record<string, unknown>) => void)[]>();
  return {
    fire(type: string, event: Record<string, unknown>) {
      for (const listener of listeners.get(type) ?? []) listener(event);
    },
    socket: {
      readyState: 1,
      send() {},
      close() {},
      addEventListener(type: string, listener: (event: Record<string, unknown>) => void) {
        listeners.set(type, [...(listeners.get(type) ?? []), listener]);
      },
    },
  };
}

async function failureAfterPeerClose(code: number, reason: string) {
  const { socket, fire } = listenedSocket();
  const transport = new WebSocketRpcTransport(socket);
  const next = transport.receive();
  fire('close', { code, reason });
  return await next.then(() => assert.fail('the transport kept receiving'), (error) => error);
}

test('a peer refusing a message as too big (1009) cuts every call: retryable, the cause named', async () => {
  // Which call sent the message cannot be told: the calls cut with it may be retried.
  const error = await failureAfterPeerClose(MESSAGE_TOO_BIG_CLOSE_CODE, 'Message too big');
  assert.equal(MESSAGE_TOO_BIG_CLOSE_CODE, 1009);
  assert.ok(error instanceof SvcInternalError);
  assert.deepEqual(
    { code: error.code, status: error.status, retryable: error.retryable, reason: error.reason },
    { code: 'internal', status: 503, retryable: true, reason: 'rpc_connection_lost' },
  );
  assert.match(error.message, /1009, a message on this connection was larger than it accepts/);
});

test('any other close by the peer is a lost connection, retryable', async () => {
  for (const code of [1000, 1001, 1006, 1011, 3000, 4000]) {
    const error = await failureAfterPeerClose(code, 'bye');
    assert.equal(error.reason, 'rpc_connection_lost', String(code));
    assert.equal(error.status, 503, String(code));
    assert.equal(error.retryable, true, String(code));
  }
});
