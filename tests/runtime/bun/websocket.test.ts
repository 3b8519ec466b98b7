// The fake main served by `serveBun` on 127.0.0.1: the shared WebSocket scenarios.
import { test } from 'node:test';
import { serveBun } from '../../../src/adapters/bun.ts';
import {
  servedBatchPipelines,
  servedSessionStreams,
  servedUpgradeRefused,
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
