// The README names constants and functions a reader will import: each must be exported under
// that name by the package entry the README shows it with, so the docs cannot drift from the code.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import * as root from '../../../mod.ts';
import * as nodeAdapter from '../../../src/adapters/node.ts';
import * as bunAdapter from '../../../src/adapters/bun.ts';
import * as denoAdapter from '../../../src/adapters/deno.ts';
import * as workersAdapter from '../../../src/adapters/workers.ts';
import * as testing from '../../../src/testing/mod.ts';
import { SIGNING_KEY_ENV, SIGNING_KID_ENV } from '../../../src/cli/commands/keygen.ts';
import { CLIENT_SECRET_ENV } from '../../../src/cli/commands/credentials.ts';

const exported = new Set<string>(
  [root, nodeAdapter, bunAdapter, denoAdapter, workersAdapter, testing].flatMap((entry) =>
    Object.keys(entry)
  ),
);

// Members of what those functions return (a server's `close()`, a plane's `jwks(env)`, the
// `signingKeys(env)` option, the RPC main's `authenticate`), not exports.
// Environment variables the `svcplane` command reads and prints, named as the command names them.
const ENVIRONMENT = new Set([SIGNING_KID_ENV, SIGNING_KEY_ENV, CLIENT_SECRET_ENV]);

// Members and parameters the README calls, not package exports (`next` is Hono's middleware one).
const MEMBERS = new Set(['authenticate', 'close', 'jwks', 'next', 'ready', 'signingKeys']);

async function readme(): Promise<string> {
  return await readFile(new URL('../../../README.md', import.meta.url), 'utf8');
}

test('every constant the README names (`UPPER_SNAKE`) is exported by the package', async () => {
  const named = new Set([...(await readme()).matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`/g)]
    .map((match) => match[1]));
  assert.ok(named.size >= 8, `found only ${named.size} constants`);
  const missing = [...named].filter((name) => !exported.has(name) && !ENVIRONMENT.has(name));
  assert.deepEqual(missing, []);
});

test('every function the README calls (`name(...)`) is exported by the package', async () => {
  const called = new Set([...(await readme()).matchAll(/`([a-z][A-Za-z0-9]+)\(/g)]
    .map((match) => match[1]));
  assert.ok(called.size > 10, `found only ${called.size} functions`);
  const missing = [...called].filter((name) => !exported.has(name) && !MEMBERS.has(name));
  assert.deepEqual(missing, []);
});
