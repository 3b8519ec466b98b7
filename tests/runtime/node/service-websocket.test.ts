// The WebSocket criterion with the real service on Node: `serveNode` on 127.0.0.1,
// authenticate, unary calls and 10 000 streamed items validated by the wrapper, for a zod
// service and an arktype service.
import { test } from 'node:test';
import { nodeWebSocketFactory, serveNode } from '../../../src/adapters/node.ts';
import {
  servedForeignTokenRefused,
  servedHandshakeEchoesRequestId,
  servedServicesOverWebSocket,
  type WebSocketServingRuntime,
} from '../websocket-scenarios.ts';

const BOUND = { timeout: 90_000 };
const RUNTIME: WebSocketServingRuntime = {
  serve: serveNode,
  requestId: 'req-node-ws',
  createWebSocket: nodeWebSocketFactory(),
};

test(
  'serveNode: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  () => servedServicesOverWebSocket(RUNTIME),
);

test(
  'serveNode: a token for another service is refused over the real socket',
  BOUND,
  () => servedForeignTokenRefused(RUNTIME),
);

test(
  "serveNode: the real service's 101 echoes the caller's X-Request-Id",
  BOUND,
  () => servedHandshakeEchoesRequestId(RUNTIME),
);
