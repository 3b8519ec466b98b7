// The quick start runs as a user runs it: a key from `svcplane keygen`, then examples/quickstart's
// plane.ts and service.ts as two processes on 127.0.0.1, then caller.ts, which must print the
// service's answer. Ports are free ones handed in through PLANE_URL and NOTES_URL.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const TSX = ['--import', 'tsx'];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ stdout: string; code: number }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd: root, env, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ stdout: stdout + stderr, code: error ? Number(error.code ?? 1) : 0 }),
    );
  });
}

/** Starts `file` and resolves once it printed `ready` (its "listening" line). */
function start(file: string, env: NodeJS.ProcessEnv, ready: RegExp): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...TSX, file], { cwd: root, env });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} did not start: ${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk;
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited with ${code}: ${output}`));
    });
  });
}

test('the quick start: keygen, plane, service, caller', { timeout: 180_000 }, async () => {
  const keygen = await run([...TSX, 'src/cli/main.ts', 'keygen', '--json'], process.env);
  assert.equal(keygen.code, 0, keygen.stdout);
  const env = {
    ...process.env,
    ...JSON.parse(keygen.stdout).env,
    BILLING_SECRET: 'a-shared-secret-of-32-characters-or-more',
    PLANE_URL: `http://127.0.0.1:${await freePort()}`,
    NOTES_URL: `http://127.0.0.1:${await freePort()}`,
  };
  const children: ChildProcess[] = [];
  try {
    children.push(await start('examples/quickstart/plane.ts', env, /plane on http/));
    children.push(await start('examples/quickstart/service.ts', env, /notes on http/));
    const caller = await run([...TSX, 'examples/quickstart/caller.ts'], env);
    assert.equal(caller.code, 0, caller.stdout);
    assert.match(caller.stdout, /\{ id: '7', text: 'hello billing' \}/);
  } finally {
    for (const child of children) child.kill();
  }
});
