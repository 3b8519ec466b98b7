// A cancelled shared timeout leaves a Deno process free to exit.
import process from 'node:process';
import { test } from 'node:test';
import { assertIdleProcessExits } from '../idle-exit-scenario.ts';

test('Deno: a process whose shared timeouts were all cancelled exits when idle', {
  timeout: 60_000,
}, () => assertIdleProcessExits([process.execPath, 'run', '-A']));
