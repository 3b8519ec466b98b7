// serveNode's server sockets and nodeWebSocketFactory's clients write a turn's frames at once.
import { test } from 'node:test';
import { nodeWebSocketFactory, serveNode } from '../../../src/adapters/node.ts';
import {
  BOUND,
  clientFramesOfOneTurnLeaveInOneWrite,
  serverFramesOfOneTurnLeaveInOneWrite,
} from '../frame-coalescing-scenarios.ts';

test(
  'nodeWebSocketFactory: frames sent in one turn leave in one write, in order',
  BOUND,
  () => clientFramesOfOneTurnLeaveInOneWrite(serveNode, nodeWebSocketFactory()),
);

test(
  'serveNode: frames a server socket sends in one turn leave in one write, in order',
  BOUND,
  () => serverFramesOfOneTurnLeaveInOneWrite(serveNode, nodeWebSocketFactory()),
);
