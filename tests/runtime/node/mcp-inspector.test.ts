// The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`), an outside client, lists and
// calls a tool of the fixture plane served by `serveNode` on 127.0.0.1.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { serveNode } from '../../../src/adapters/node.ts';
import { createPlaneDeployment } from '../../conformance/plane-fixture.ts';

const INSPECTOR = fileURLToPath(
  new URL(
    '../../../node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js',
    import.meta.url,
  ),
);

function inspector(home: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [INSPECTOR, '--cli', ...args],
      // The Inspector writes its settings below HOME: a scratch one per run.
      { env: { ...process.env, HOME: home }, timeout: 60_000 },
      (error, stdout) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout }),
    );
  });
}

test("MCP Inspector CLI lists the plane's tools and calls one", { timeout: 120_000 }, async () => {
  const deployment = await createPlaneDeployment({
    websocketServices: true,
  });
  const server = await serveNode(
    { fetch: (request: Request, env?: unknown) => deployment.plane.fetch(request, env) },
    { hostname: '127.0.0.1', port: 0 },
  );
  const home = await mkdtemp(join(tmpdir(), 'svcplane-inspector-'));
  try {
    const common = [
      `${server.url}/mcp`,
      '--transport',
      'http',
      '--header',
      'Authorization: Bearer t-alice',
    ];
    const listed = await inspector(home, [...common, '--method', 'tools/list']);
    assert.equal(listed.code, 0, listed.stdout);
    const names = (JSON.parse(listed.stdout).tools as { name: string }[]).map((tool) => tool.name);
    assert.ok(names.includes('svc-a_whoami'), names.join());
    const called = await inspector(home, [
      ...common,
      '--method',
      'tools/call',
      '--tool-name',
      'svc-a_ticks',
      '--tool-arg',
      'n=3',
    ]);
    assert.equal(called.code, 0, called.stdout);
    assert.deepEqual(JSON.parse(called.stdout).structuredContent, {
      items: [{ i: 0 }, { i: 1 }, { i: 2 }],
    });
    assert.equal(deployment.count('calls', 'svc-a.echo#ticks'), 1);
  } finally {
    await server.close();
    await rm(home, { recursive: true, force: true });
  }
});
