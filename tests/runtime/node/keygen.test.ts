// `npm run keygen` end to end: the printed entry loads as a signing key as-is.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadSigningAuthority } from '../../../src/plane/signing-keys.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function keygen(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'scripts/keygen.ts', ...args],
      { cwd: root, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ stdout, stderr, code });
      },
    );
  });
}

test('keygen prints a ready JWK signing-key entry and a hint', async () => {
  const { stdout, stderr, code } = await keygen('--kid', 'k-test');
  assert.equal(code, 0, stderr);
  const entry = JSON.parse(stdout);
  assert.equal(entry.kid, 'k-test');
  assert.equal(JSON.parse(entry.secret).kid, 'k-test');
  assert.match(stderr, /signingKeys/);
  const authority = await loadSigningAuthority([entry]);
  assert.equal(authority.signer.kid, 'k-test');
});

test('keygen --pem prints a PKCS#8 PEM secret', async () => {
  const { stdout, code } = await keygen('--pem');
  assert.equal(code, 0);
  const entry = JSON.parse(stdout);
  assert.match(entry.secret, /^-----BEGIN PRIVATE KEY-----\n/);
  assert.equal((await loadSigningAuthority([entry])).jwks.keys[0].kid, entry.kid);
});

test('keygen refuses unknown arguments and a missing kid value', async () => {
  for (const args of [['--bogus'], ['--kid']]) {
    const { stdout, stderr, code } = await keygen(...args);
    assert.notEqual(code, 0, args.join(' '));
    assert.equal(stdout, '');
    assert.match(stderr, /usage: npm run keygen/);
  }
});
