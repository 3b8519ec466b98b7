// The WebSocket criterion with the real service on Bun: `serveBun` on 127.0.0.1,
// authenticate, unary calls and 10 000 streamed items validated by the wrapper, for a zod
// service and an arktype service.
import { test } from 'node:test';
import { serveBun } from '../../../src/adapters/bun.ts';
import {
  servedForeignTokenRefused,
  servedHandshakeEchoesRequestId,
  servedServicesOverWebSocket,
  type WebSocketServingRuntime,
} from '../websocket-scenarios.ts';

const BOUND = { timeout: 90_000 };
const RUNTIME: WebSocketServingRuntime = { serve: serveBun, requestId: 'req-bun-ws' };

test(
  'serveBun: the real zod and arktype services over a WebSocket on 127.0.0.1',
  BOUND,
  () => servedServicesOverWebSocket(RUNTIME),
);

test(
  'serveBun: a token for another service is refused over the real socket',
  BOUND,
  () => servedForeignTokenRefused(RUNTIME),
);

test(
  "serveBun: the real service's 101 echoes the caller's X-Request-Id",
  BOUND,
  () => servedHandshakeEchoesRequestId(RUNTIME),
);
