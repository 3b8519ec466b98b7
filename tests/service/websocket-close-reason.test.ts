// What a WebSocket close frame tells the peer when a session aborts: the message of this
// system's own errors, written for the peer; for anything else (a parser's text, Cap'n Web's
// own, which may quote internals or the peer's input) only that the session aborted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CapabilityAuthError, SvcInternalError } from '../../src/core/errors.ts';
import { WebSocketRpcTransport } from '../../src/service/transports/websocket-rpc-transport.ts';

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
