// The fake main served by `serveBun` on 127.0.0.1: the shared WebSocket scenarios.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { serveBun } from '../../../src/adapters/bun.ts';
import { MAX_WEBSOCKET_SEND_BUFFER_BYTES } from '../../../src/service/websocket-rpc-transport.ts';
import {
  SVC_WEBSOCKET_UPGRADER,
  type WebSocketUpgrader,
} from '../../../src/service/websocket-upgrade.ts';
import {
  rawUpgradeRequest,
  servedAfterSilentHandshake,
  servedBatchPipelines,
  servedHandshakeKeepsEveryCookie,
  servedNoSubprotocolAgreed,
  servedSessionStreams,
  servedThrowingTargetAnswersBare500,
  servedUpgradeRefused,
  servedWrongPathRefused,
  type WebSocketServingRuntime,
} from '../websocket-scenarios.ts';

const BOUND = { timeout: 60_000 };
const RUNTIME: WebSocketServingRuntime = { serve: serveBun, requestId: 'req-bun-ws' };

test(
  'serveBun: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  () => servedSessionStreams(RUNTIME),
);

test(
  'serveBun: HTTP-batch over a real socket pipelines authenticate with the call',
  BOUND,
  () => servedBatchPipelines(RUNTIME),
);

test(
  'serveBun: an upgrade to an ability without WebSocket is refused',
  BOUND,
  () => servedUpgradeRefused(RUNTIME),
);

test(
  'serveBun: a session whose first handshake never completes opens a fresh socket',
  BOUND,
  () => servedAfterSilentHandshake(RUNTIME),
);

test(
  'serveBun: a peer that stops reading gets a 1013 close, not silently dropped messages',
  BOUND,
  async () => {
    const message = 'x'.repeat(4 * 1024 * 1024);
    const count = Math.ceil(MAX_WEBSOCKET_SEND_BUFFER_BYTES / message.length) + 4;
    let serverClosed!: (close: { code: number; reason: string }) => void;
    const serverClose = new Promise<{ code: number; reason: string }>((resolve) => {
      serverClosed = resolve;
    });
    const server = await serveBun({
      fetch(request, env) {
        const upgrader = (env as Record<PropertyKey, unknown>)[
          SVC_WEBSOCKET_UPGRADER
        ] as WebSocketUpgrader;
        return upgrader.upgrade(request, env, (socket) => {
          socket.addEventListener('close', (event) => serverClosed(event));
          for (let i = 0; i < count; i++) socket.send(message);
        });
      },
    });
    const client = connect(server.port, '127.0.0.1');
    client.on('error', () => {});
    let received = Buffer.alloc(0);
    client.on('data', (data: Buffer) => {
      received = Buffer.concat([received.subarray(-256), data]);
    });
    const clientClosed = new Promise<void>((resolve) => client.on('close', () => resolve()));
    let bound: ReturnType<typeof setTimeout> | undefined;
    try {
      client.write(rawUpgradeRequest('/slow'));
      client.pause();
      const close = await Promise.race([
        serverClose,
        new Promise<undefined>((resolve) => (bound = setTimeout(() => resolve(undefined), 20_000))),
      ]);
      assert.equal(close?.code, 1013);
      assert.match(close.reason, /reads too slowly/);
      // Once the peer reads again, what was sent arrives, then the close frame with its code.
      client.resume();
      await clientClosed;
      const closeFrame = received.subarray(received.lastIndexOf(0x88));
      assert.equal(closeFrame.readUInt16BE(2), 1013);
    } finally {
      clearTimeout(bound);
      client.destroy();
      await server.close();
    }
  },
);

test(
  'serveBun: every Set-Cookie of the target rides on the 101',
  BOUND,
  () => servedHandshakeKeepsEveryCookie(RUNTIME),
);

test(
  'serveBun: a client offering subprotocols is agreed none',
  BOUND,
  () => servedNoSubprotocolAgreed(RUNTIME),
);

test(
  'serveBun: a target that throws is a bare 500, never a development error page',
  BOUND,
  () => servedThrowingTargetAnswersBare500(RUNTIME),
);

test(
  'serveBun: a WebSocket to a wrong path fails with 404 and its URL, not retryable',
  BOUND,
  () => servedWrongPathRefused(RUNTIME),
);
