/**
 * A real MCP client against a real plane: the SDK's own `Client` with its Streamable HTTP
 * client transport, over a socket on 127.0.0.1, lists the fixture plane's tools and calls one
 * unary and one streaming tool (with progress). Each runtime's test file says how it serves.
 */
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchTarget, ServedServer, ServeOptions } from '../../src/adapters/serve-target.ts';
import { createPlaneDeployment } from '../conformance/plane-fixture.ts';

/** How a runtime serves a fetch target on a port. */
export type Serve = (target: FetchTarget, options: ServeOptions) => Promise<ServedServer>;

/** Lists tools and calls `svc-a_whoami` and the streaming `svc-a_ticks` with progress. */
export async function sdkClientListsAndCallsTools(serve: Serve): Promise<void> {
  const deployment = await createPlaneDeployment({
    websocketServices: true,
  });
  const server = await serve(
    { fetch: (request: Request, env?: unknown) => deployment.plane.fetch(request, env) },
    { hostname: '127.0.0.1', port: 0 },
  );
  const client = new Client({ name: 'svcplane-test', version: '1.0.0' });
  try {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { Authorization: 'Bearer t-alice' } },
      }),
    );
    assert.equal(client.getServerVersion()?.name, 'svc-plane');
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    assert.ok(names.includes('svc-a_whoami') && names.includes('svc-a_ticks'), names.join());

    const whoami = await client.callTool({ name: 'svc-a_whoami', arguments: {} });
    assert.equal(whoami.isError, undefined);
    const report = whoami.structuredContent as { identity: { subject: { id: string } } };
    assert.equal(report.identity.subject.id, 'alice');

    const progress: { progress: number; message?: string }[] = [];
    const ticks = await client.callTool(
      { name: 'svc-a_ticks', arguments: { n: 5 } },
      undefined,
      { onprogress: (notification) => progress.push(notification) },
    );
    assert.deepEqual(ticks.structuredContent, { items: [0, 1, 2, 3, 4].map((i) => ({ i })) });
    assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3, 4, 5]);
    assert.deepEqual(JSON.parse(progress[4].message!), { i: 4 });

    const failed = await client.callTool({ name: 'svc-a_fail', arguments: { kind: 'error' } });
    assert.equal(failed.isError, true);
    assert.ok(!JSON.stringify(failed).includes(deployment.stats.marker));
  } finally {
    await client.close();
    await server.close();
  }
}
