/**
 * What the `svcplane` command must do on every runtime that runs it from source (`deno run`,
 * `bun`): make a signing key that loads as-is, and inspect a token offline with the verdict and
 * exit code of a refusal. Each runtime's test file only says how its executable is started.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSigningAuthority } from '../../src/plane/signing-keys.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs the command with `args` through `launcher` (the runtime's executable and its flags). */
export function runCli(
  launcher: readonly string[],
  args: readonly string[],
): Promise<{ stdout: string; stderr: string; code: number }> {
  const [command, ...flags] = launcher;
  return new Promise((resolve) => {
    execFile(
      command,
      [...flags, 'src/cli/main.ts', ...args],
      { cwd: root, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ stdout, stderr, code });
      },
    );
  });
}

/** keygen prints an entry that loads; token inspect refuses unreadable claims with exit 4. */
export async function assertKeygenAndInspect(launcher: readonly string[]): Promise<void> {
  const keygen = await runCli(launcher, ['keygen', '--kid', 'k-runtime', '--json']);
  assert.equal(keygen.code, 0, keygen.stderr);
  const printed = JSON.parse(keygen.stdout);
  assert.deepEqual(printed.env, { SVC_SIGNING_KID: 'k-runtime', SVC_SIGNING_KEY: printed.secret });
  const authority = await loadSigningAuthority([{ kid: printed.kid, secret: printed.secret }]);
  assert.equal(authority.signer.kid, 'k-runtime');

  const inspect = await runCli(launcher, ['token', 'inspect', 'eyJhbGciOiJFUzI1NiJ9.e30.AAAA']);
  assert.equal(inspect.code, 4, inspect.stderr);
  assert.match(inspect.stdout, /^header +\{"alg":"ES256"\}$/m);
  assert.match(inspect.stdout, /^verdict +refused: invalid_claims \(401\)/m);

  const usage = await runCli(launcher, ['keygen', '--bogus']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /unknown option --bogus/);
}
