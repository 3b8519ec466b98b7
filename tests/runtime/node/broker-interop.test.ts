// Cross-runtime interop of brokered sessions over real 127.0.0.1 sockets: the caller on one
// runtime, the plane (broker) on another, the service on a third, each its own process running
// tests/runtime/broker-interop/role.ts, for a Node, a Deno and a Bun plane. Every process is
// bounded in time and stopped by its pid.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const ROLE = path.join(root, 'tests/runtime/broker-interop/role.ts');
const BOUND = { timeout: 120_000 };
/** How long a server process lives at most. */
const LIFETIME_MS = 60_000;

type Runtime = 'node' | 'deno' | 'bun';

function command(runtime: Runtime): [string, string[]] {
  const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
  if (runtime === 'deno') return [bin('deno'), ['run', '-A', '--no-check', ROLE]];
  if (runtime === 'bun') return [bin('bun'), ['run', ROLE]];
  return [process.execPath, ['--import', 'tsx', ROLE]];
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts a role and resolves with its first JSON line of stdout. */
function start(
  runtime: Runtime,
  vars: Record<string, string>,
  children: ChildProcess[],
): Promise<Record<string, unknown>> {
  const [file, args] = command(runtime);
  const child = spawn(file, args, {
    cwd: root,
    env: { ...process.env, NO_COLOR: '1', INTEROP_LIFETIME_MS: String(LIFETIME_MS), ...vars },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(
      () => reject(new Error(`${runtime} ${vars.INTEROP_ROLE}: no answer\n${stderr}`)),
      60_000,
    );
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const line = stdout.split('\n').find((text) => text.startsWith('{'));
      if (line !== undefined && stdout.includes('\n')) {
        clearTimeout(timer);
        resolve(JSON.parse(line));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${runtime} ${vars.INTEROP_ROLE} exited ${code}\n${stderr}`));
    });
  });
}

async function brokeredAcross(caller: Runtime, plane: Runtime, service: Runtime): Promise<void> {
  const children: ChildProcess[] = [];
  try {
    const [planePort, servicePort] = [await freePort(), await freePort()];
    const planeUrl = `http://127.0.0.1:${planePort}`;
    const serviceUrl = `http://127.0.0.1:${servicePort}`;
    const urls = { INTEROP_PLANE_URL: planeUrl, INTEROP_SERVICE_URL: serviceUrl };
    await Promise.all([
      start(
        service,
        { ...urls, INTEROP_ROLE: 'service', INTEROP_PORT: String(servicePort) },
        children,
      ),
      start(plane, { ...urls, INTEROP_ROLE: 'plane', INTEROP_PORT: String(planePort) }, children),
    ]);
    const { result } = await start(caller, { ...urls, INTEROP_ROLE: 'caller' }, children) as {
      result: Record<string, Record<string, unknown>>;
    };
    assert.equal(result.caller, caller);
    for (const report of [result.overSocket, result.overBatch]) {
      assert.equal(report.runtime, service);
      assert.deepEqual(report.subject, { id: 'alice', orgId: 'org-1' });
      assert.equal(report.brokerServiceId, 'interop-plane');
      assert.deepEqual(report.connInfo, {
        remote: { address: '127.0.0.1', addressType: 'IPv4', port: 1, transport: 'tcp' },
      });
    }
    assert.equal(result.overSocket.requestId, `req-interop-${caller}`);
    const items = result.items as unknown as { i: number }[];
    assert.equal(items.length, 200);
    assert.ok(items.every((item, index) => JSON.stringify(item) === JSON.stringify({ i: index })));
    assert.deepEqual(result.refused, {
      code: 'internal',
      status: 405,
      retryable: false,
      reason: 'stream_requires_session_transport',
    });
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  }
}

test(
  'broker interop: a Deno caller, a Node plane, a Bun service',
  BOUND,
  () => brokeredAcross('deno', 'node', 'bun'),
);

test(
  'broker interop: a Bun caller, a Deno plane, a Node service',
  BOUND,
  () => brokeredAcross('bun', 'deno', 'node'),
);

test(
  'broker interop: a Node caller, a Bun plane, a Deno service',
  BOUND,
  () => brokeredAcross('node', 'bun', 'deno'),
);
