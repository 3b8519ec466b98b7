// The fake main served by `serveDeno` on 127.0.0.1: the shared WebSocket scenarios.
import { test } from 'node:test';
import { denoWebSocketFactory, serveDeno } from '../../../src/adapters/deno.ts';
import {
  servedAfterSilentHandshake,
  servedBatchPipelines,
  servedHandshakeKeepsEveryCookie,
  servedNoSubprotocolAgreed,
  servedSessionStreams,
  servedSlowReaderClosed,
  servedThrowingTargetAnswersBare500,
  servedUpgradeRefused,
  servedWrongPathRefused,
  type WebSocketServingRuntime,
} from '../websocket-scenarios.ts';

const BOUND = { timeout: 60_000 };
// Deno's own client is covered by service-websocket.test.ts; these scenarios use the adapter's.
const RUNTIME: WebSocketServingRuntime = {
  serve: serveDeno,
  requestId: 'req-deno-ws',
  createWebSocket: denoWebSocketFactory(),
};

test(
  'serveDeno: a WebSocket session authenticates, calls and streams 10 000 items',
  BOUND,
  () => servedSessionStreams(RUNTIME),
);

test(
  'serveDeno: HTTP-batch over a real socket pipelines authenticate with the call',
  BOUND,
  () => servedBatchPipelines(RUNTIME),
);

test(
  'serveDeno: an upgrade to an ability without WebSocket is refused',
  BOUND,
  () => servedUpgradeRefused(RUNTIME),
);

test(
  'serveDeno: a session whose first handshake never completes opens a fresh socket',
  BOUND,
  () => servedAfterSilentHandshake(RUNTIME),
);

test(
  "serveDeno: with Deno's own client, a session whose first handshake never completes recovers",
  BOUND,
  () => servedAfterSilentHandshake({ ...RUNTIME, createWebSocket: undefined }),
);

test(
  'serveDeno: a peer that stops reading is closed with 1013 once the send buffer passes its limit',
  BOUND,
  () => servedSlowReaderClosed(RUNTIME),
);

test(
  'serveDeno: every Set-Cookie of the target rides on the 101',
  BOUND,
  () => servedHandshakeKeepsEveryCookie(RUNTIME),
);

test(
  'serveDeno: a client offering subprotocols is agreed none',
  BOUND,
  () => servedNoSubprotocolAgreed(RUNTIME),
);

test(
  'serveDeno: a target that throws is a bare 500',
  BOUND,
  () => servedThrowingTargetAnswersBare500(RUNTIME),
);

test(
  'serveDeno: a WebSocket to a wrong path fails with 404 and its URL, not retryable',
  BOUND,
  () => servedWrongPathRefused(RUNTIME),
);
