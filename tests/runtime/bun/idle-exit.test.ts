// A cancelled shared timeout leaves a Bun process free to exit.
import process from 'node:process';
import { test } from 'node:test';
import { assertIdleProcessExits } from '../idle-exit-scenario.ts';

test('Bun: a process whose shared timeouts were all cancelled exits when idle', {
  timeout: 60_000,
}, () => assertIdleProcessExits([process.execPath]));
