// denoWebSocketFactory's clients write a turn's frames at once (serveDeno's server sockets are
// Deno's own, which writes each frame as it is sent).
import { test } from 'node:test';
import { denoWebSocketFactory, serveDeno } from '../../../src/adapters/deno.ts';
import { BOUND, clientFramesOfOneTurnLeaveInOneWrite } from '../frame-coalescing-scenarios.ts';

test(
  'denoWebSocketFactory: frames sent in one turn leave in one write, in order',
  BOUND,
  () => clientFramesOfOneTurnLeaveInOneWrite(serveDeno, denoWebSocketFactory()),
);
