// The MCP endpoint's contract rules beyond A12: access class, identical catalogs, hostile bodies
// and headers, opaque errors, no retries, idempotency keys, events, svcInvocation, cancellation
// on disconnect, prompts and resources, mounting and failing closed.
import assert from 'node:assert/strict';
import test from 'node:test';
import type { MiddlewareHandler } from 'hono';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import { createMcpConformancePlane } from '../../src/testing/mcp-conformance.ts';
import { MCP_URL, mcpRequest, readMcp, rpc } from './mcp-client.ts';
import { createPlaneDeployment, fixtureInvocationMiddleware } from './plane-fixture.ts';

async function deploy(plane: Partial<ControlPlaneOptions> = {}) {
  const deployment = await createPlaneDeployment({
    websocketServices: true,
    plane,
  });
  const send = async (request: Request) => await readMcp(await deployment.plane.fetch(request));
  const call = (name: string, args: Record<string, unknown>, options = {}) =>
    send(
      mcpRequest(rpc('tools/call', { name, arguments: args }), { token: 't-alice', ...options }),
    );
  return { deployment, send, call };
}

const NO_LEAK = /\bat [\w.<>]+ \(|node_modules|\/work\/|\.ts:\d+|file:\/\//;

test('ACC-04 (MCP) a user caller on a service-only ability tool fails in-band with 403, svc-a untouched', async () => {
  const { deployment, call } = await deploy();
  await call('svc-a_whoami', {}, { token: 't-bob' });
  const before = deployment.rpcRequests('svc-a').length;
  const answer = await call('svc-a_internal_whoami', {}, { token: 't-bob' });
  assert.equal(answer.result.isError, true);
  const record = answer.result._meta['svcplane/error'];
  assert.equal(record.status, 403);
  assert.equal(record.code, 'capability_auth');
  assert.equal(deployment.rpcRequests('svc-a').length, before);
  assert.equal(deployment.count('factories', 'svc-a.internal'), 0);
  // (control) a service caller reaches it.
  const robot = await call('svc-a_internal_whoami', {}, { token: 't-robot' });
  assert.equal(robot.result.isError, undefined);
  assert.equal(robot.result.structuredContent.identity.serviceId, 'svc-robot');
});

test('REG-05 (MCP) tools/list is byte-identical for t-alice, t-bob and t-robot', async () => {
  const { send } = await deploy();
  const bodies: string[] = [];
  for (const token of ['t-alice', 't-bob', 't-robot']) {
    const answer = await send(
      mcpRequest({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }, { token }),
    );
    assert.equal(answer.status, 200);
    bodies.push(answer.text);
  }
  assert.equal(bodies[1], bodies[0]);
  assert.equal(bodies[2], bodies[0]);
  const tools = JSON.parse(bodies[0]).result.tools as Record<string, unknown>[];
  const names = tools.map((tool) => tool.name).sort();
  assert.deepEqual(names, [
    'svc-a_fail',
    'svc-a_failShaped',
    'svc-a_internal_whoami',
    'svc-a_ticks',
    'svc-a_whoami',
  ]);
  const ticks = tools.find((tool) => tool.name === 'svc-a_ticks')!;
  assert.equal((ticks.inputSchema as { type: string }).type, 'object');
  assert.deepEqual((ticks.outputSchema as { required: string[] }).required, ['items']);
  const shaped = tools.find((tool) => tool.name === 'svc-a_failShaped')!;
  assert.deepEqual(shaped.annotations, { idempotentHint: true });
});

test('DOS-02 (MCP) 100 000 nested arrays or objects are refused with 4xx; the plane stays up', async () => {
  const { send, call } = await deploy();
  const arrays = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":${
    '['.repeat(100_000)
  }${']'.repeat(100_000)}}}`;
  const objects = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
  for (const body of [arrays, objects]) {
    const answer = await send(mcpRequest(body, { token: 't-alice' }));
    assert.ok(answer.status >= 400 && answer.status < 500, String(answer.status));
    assert.doesNotMatch(answer.text, NO_LEAK);
  }
  assert.equal((await call('svc-a_whoami', {})).status, 200);
});

test('DOS-03 (MCP) oversized headers get 4xx; the plane stays up', async () => {
  const { send, call } = await deploy();
  const big = 'x'.repeat(64 * 1024);
  const answers = [
    await send(mcpRequest(rpc('tools/list'), { headers: { Authorization: `Bearer ${big}` } })),
    await send(
      mcpRequest(rpc('tools/list'), { token: 't-alice', headers: { 'MCP-Protocol-Version': big } }),
    ),
    await send(
      mcpRequest(rpc('tools/list'), { token: 't-alice', headers: { Origin: `https://${big}` } }),
    ),
  ];
  assert.deepEqual(answers.map((a) => a.status), [401, 400, 403]);
  const many: Record<string, string> = {};
  for (let i = 0; i < 500; i++) many[`X-Filler-${i}`] = 'y';
  const crowded = await send(mcpRequest(rpc('tools/list'), { token: 't-alice', headers: many }));
  assert.ok([200, 400, 431].includes(crowded.status));
  assert.equal((await call('svc-a_whoami', {})).status, 200);
});

test('ERR-09 (MCP) errors carry no stack traces, file paths or node_modules', async () => {
  const { send, call } = await deploy({ mcp: { maxBodyBytes: 1024 } });
  const answers = [
    await send(mcpRequest('{', { token: 't-alice' })),
    await send(mcpRequest('[1]', { token: 't-alice' })),
    await send(mcpRequest(rpc('tools/list'), { token: 't-alice', method: 'DELETE' })),
    await send(
      mcpRequest(JSON.stringify(rpc('tools/list', { pad: 'x'.repeat(4096) })), {
        token: 't-alice',
      }),
    ),
    await call('svc-a_fail', { kind: 'cause' }),
    await call('svc-a_fail', { kind: 'aggregate' }),
    await call('svc-a_failShaped', { status: 'x' }),
    await call('nope', {}),
    await send(mcpRequest(rpc('no/such/method'), { token: 't-alice' })),
  ];
  assert.equal(answers[3].status, 413);
  for (const answer of answers) {
    assert.doesNotMatch(answer.text, NO_LEAK, answer.text.slice(0, 200));
  }
});

test('ERR-10 (MCP) a retryable 503 from an idempotent method reaches the caller once, unretried', async () => {
  const { deployment, call } = await deploy();
  const answer = await call('svc-a_failShaped', {
    status: 503,
    retryable: true,
    reason: 'overloaded',
  });
  assert.equal(answer.result.isError, true);
  const record = answer.result._meta['svcplane/error'];
  assert.equal(record.status, 503);
  assert.equal(record.retryable, true);
  assert.equal(record.code, 'handler');
  assert.equal(record.reason, 'overloaded');
  assert.equal(deployment.count('calls', 'svc-a.echo#failShaped'), 1);
});

test('IDEM-04 (MCP) only a valid X-Svc-Idempotency-Key reaches the service', async () => {
  const { call } = await deploy();
  const valid = await call('svc-a_whoami', {}, {
    headers: { 'X-Svc-Idempotency-Key': 'order-42=a_b' },
  });
  assert.equal(valid.result.structuredContent.idempotencyKey, 'order-42=a_b');
  for (const key of ['has space', 'x'.repeat(256), 'semi;colon']) {
    const answer = await call('svc-a_whoami', {}, { headers: { 'X-Svc-Idempotency-Key': key } });
    assert.equal(answer.result.structuredContent.idempotencyKey, null, key.slice(0, 20));
  }
});

test('MCP tools/call: delegated identity, request id and events; svcInvocation names the tool', async () => {
  const seen: unknown[] = [];
  const record = { runs: 0, invocations: [] };
  const fixture = fixtureInvocationMiddleware(record);
  // An audit middleware reads svcInvocation after next(): the dispatch named the tool by then.
  const audit: MiddlewareHandler = async (c, next) => {
    await fixture(c, next);
    seen.push(c.get('svcInvocation' as never));
  };
  const { deployment, call } = await deploy({ invocationMiddleware: audit });
  const answer = await call('svc-a_whoami', {}, { headers: { 'X-Request-Id': 'mcp-req-1' } });
  const report = answer.result.structuredContent;
  assert.equal(report.identity.subject.id, 'alice');
  assert.equal(report.requestId, 'mcp-req-1');
  assert.equal(answer.result.content[0].type, 'text');
  assert.deepEqual(JSON.parse(answer.result.content[0].text), report);
  assert.deepEqual(seen[0], {
    surface: 'mcp',
    serviceId: 'svc-a',
    abilityId: 'svc-a.echo',
    method: 'whoami',
    tool: 'svc-a_whoami',
  });
  const completed = deployment.eventsNamed('svc.mcp.tool.completed');
  assert.equal(completed.length, 1);
  assert.equal(completed[0].requestId, 'mcp-req-1');
  assert.equal(completed[0].tool, 'svc-a_whoami');
  await call('svc-a_fail', { kind: 'error' });
  const failed = deployment.eventsNamed('svc.mcp.tool.failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0].status, 500);
});

test('MCP streaming tool: a client that goes away cancels the service stream instead of draining it', async () => {
  const { deployment } = await deploy();
  const controller = new AbortController();
  const request = new Request(MCP_URL, {
    method: 'POST',
    signal: controller.signal,
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: 'Bearer t-alice',
    },
    body: JSON.stringify(
      rpc('tools/call', {
        name: 'svc-a_ticks',
        arguments: { n: 100_000, delayMs: 2 },
        _meta: { progressToken: 'p' },
      }),
    ),
  });
  const response = await deployment.plane.fetch(request);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while ((text.match(/notifications\/progress/g) ?? []).length < 3) {
    const next = await reader.read();
    assert.equal(next.done, false);
    text += decoder.decode(next.value);
  }
  await reader.cancel();
  for (let i = 0; i < 100 && deployment.count('calls', 'svc-a.echo#ticks.cancelled') === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#ticks.cancelled'), 1);
  assert.ok(deployment.count('calls', 'svc-a.echo#ticks.yielded') < 1000);
});

test('MCP body limit: 413 past maxBodyBytes, with and without Content-Length', async () => {
  const { send } = await deploy({ mcp: { maxBodyBytes: 2048 } });
  const body = JSON.stringify(rpc('tools/list', { pad: 'x'.repeat(4096) }));
  assert.equal((await send(mcpRequest(body, { token: 't-alice' }))).status, 413);
  const bytes = new TextEncoder().encode(body);
  const chunked = new Request(MCP_URL, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: new ReadableStream({
      start(controller) {
        controller.enqueue(bytes.slice(0, 1500));
        controller.enqueue(bytes.slice(1500));
        controller.close();
      },
    }),
    // @ts-ignore: needed by Node's fetch for a streamed body
    duplex: 'half',
  });
  assert.equal(chunked.headers.get('Content-Length'), null);
  assert.equal((await send(chunked)).status, 413);
});

test('MCP fails closed when the catalog cannot be built, and is absent without MCP projections', async () => {
  const { deployment, send } = await deploy();
  for (const id of ['svc-a', 'svc-b', 'svc-c', 'svc-d'] as const) deployment.stop(id);
  const down = await send(mcpRequest(rpc('tools/list'), { token: 't-alice' }));
  assert.ok(down.status >= 500, String(down.status));
  assert.doesNotMatch(down.text, NO_LEAK);
  const { send: sendWithoutMcp, deployment: other } = await deploy();
  other.stop('svc-a');
  const absent = await sendWithoutMcp(mcpRequest(rpc('tools/list'), { token: 't-alice' }));
  assert.equal(absent.status, 404);
  assert.equal(absent.headers.get('Cache-Control'), 'no-store');
});

test('MCP prompts and resources: listed, read and got through the invocation path', async () => {
  const plane = await createMcpConformancePlane();
  const send = async (body: unknown) =>
    await readMcp(
      await plane.fetch(
        new Request('http://127.0.0.1:3000/mcp', {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
          },
          body: JSON.stringify(body),
        }),
      ),
    );
  const prompts = await send(rpc('prompts/list'));
  const withArgs = prompts.result.prompts.find((p: { name: string }) =>
    p.name === 'test_prompt_with_arguments'
  );
  assert.deepEqual(withArgs.arguments, [
    { name: 'arg1', required: true },
    { name: 'arg2', required: true },
  ]);
  const got = await send(
    rpc('prompts/get', { name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } }),
  );
  assert.deepEqual(got.result.messages, [
    { role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='a', arg2='b'" } },
  ]);
  const missing = await send(
    rpc('prompts/get', { name: 'test_prompt_with_arguments', arguments: { arg1: 'a' } }),
  );
  assert.equal(missing.error.code, -32602);
  assert.equal(missing.error.data.status, 422);
  const resources = await send(rpc('resources/list'));
  assert.deepEqual(resources.result.resources.map((r: { uri: string }) => r.uri), [
    'test://static-text',
  ]);
  const templates = await send(rpc('resources/templates/list'));
  assert.equal(templates.result.resourceTemplates[0].uriTemplate, 'test://template/{id}/data');
  const read = await send(rpc('resources/read', { uri: 'test://template/a%20b/data' }));
  assert.deepEqual(JSON.parse(read.result.contents[0].text), {
    id: 'a b',
    templateTest: true,
    data: 'Data for ID: a b',
  });
  assert.equal(read.result.contents[0].mimeType, 'application/json');
  const unknown = await send(rpc('resources/read', { uri: 'test://nothing' }));
  assert.equal(unknown.error.code, -32002);
  const batch = await readMcp(
    await plane.fetch(
      new Request('http://127.0.0.1:3000/mcp', {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'MCP-Protocol-Version': '2025-03-26',
        },
        body: JSON.stringify([rpc('ping'), rpc('tools/list')]),
      }),
    ),
  );
  assert.equal(batch.messages.length, 2);
});
