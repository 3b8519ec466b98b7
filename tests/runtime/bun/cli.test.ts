// `bun src/cli/main.ts`: the svcplane command from source on Bun.
import process from 'node:process';
import { test } from 'node:test';
import { assertKeygenAndInspect } from '../cli-scenarios.ts';

test('svcplane on Bun: keygen loads as-is, token inspect refuses with exit 4', {
  timeout: 120_000,
}, () => assertKeygenAndInspect([process.execPath]));
