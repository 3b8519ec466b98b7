// Security checklist A12: the MCP endpoint, attacked from the outside through the fixture plane
// (bearer invocation middleware, svc-a reached over in-memory HTTP and WebSocket legs).
import assert from 'node:assert/strict';
import test from 'node:test';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import { mcpRequest, readMcp, rpc } from './mcp-client.ts';
import { createPlaneDeployment, PLANE_URL } from './plane-fixture.ts';

const APP_ORIGIN = 'https://app.fixture.test';

async function deploy(plane: Partial<ControlPlaneOptions> = {}) {
  const deployment = await createPlaneDeployment({
    websocketServices: true,
    plane: {
      publicOrigin: PLANE_URL,
      mcp: { allowedOrigins: [APP_ORIGIN], ...(plane.mcp || {}) },
      ...Object.fromEntries(Object.entries(plane).filter(([key]) => key !== 'mcp')),
    },
  });
  const send = async (request: Request) => await readMcp(await deployment.plane.fetch(request));
  const call = (name: string, args: Record<string, unknown>, options = {}) =>
    send(
      mcpRequest(rpc('tools/call', { name, arguments: args }), { token: 't-alice', ...options }),
    );
  return { deployment, send, call };
}

test('MCP-01 accepted protocol versions (and no header, read as 2025-03-26) are processed', async () => {
  const { send } = await deploy();
  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '']) {
    const answer = await send(
      mcpRequest(rpc('tools/list'), {
        token: 't-alice',
        headers: { 'MCP-Protocol-Version': version },
      }),
    );
    assert.equal(answer.status, 200, `version ${version || '(absent)'}`);
    assert.ok(answer.result.tools.some((tool: { name: string }) => tool.name === 'svc-a_whoami'));
  }
  // An initialize naming a revision outside the three negotiates the latest, never a 2024 one.
  for (
    const [asked, agreed] of [
      ['2024-11-05', '2025-11-25'],
      ['2024-10-07', '2025-11-25'],
      ['2099-01-01', '2025-11-25'],
      ['2025-06-18', '2025-06-18'],
    ]
  ) {
    const answer = await send(
      mcpRequest(
        rpc('initialize', {
          protocolVersion: asked,
          capabilities: {},
          clientInfo: { name: 'probe', version: '1' },
        }),
        { token: 't-alice', headers: { 'MCP-Protocol-Version': '' } },
      ),
    );
    assert.equal(answer.status, 200);
    assert.equal(answer.result.protocolVersion, agreed, `initialize ${asked}`);
  }
});

test('MCP-02 unsupported MCP-Protocol-Version values: 400 before any tool runs', async () => {
  const { deployment, call } = await deploy();
  for (const version of ['2099-01-01', 'latest', '2025-06-19', '1', '2024-11-05']) {
    const runs = deployment.middleware.runs;
    const answer = await call('svc-a_whoami', {}, { headers: { 'MCP-Protocol-Version': version } });
    assert.equal(answer.status, 400, version);
    assert.equal(deployment.middleware.runs, runs, 'refused before the middleware');
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#whoami'), 0);
});

test('MCP-03 a foreign Origin is 403 before the middleware, with or without credentials', async () => {
  const { deployment, call } = await deploy();
  for (const token of [undefined, 't-alice']) {
    const runs = deployment.middleware.runs;
    const answer = await call('svc-a_whoami', {}, {
      token,
      headers: {
        Origin: 'http://evil.test',
        ...(token === undefined ? { Authorization: '' } : {}),
      },
    });
    assert.equal(answer.status, 403, `token ${token}`);
    assert.equal(answer.headers.get('WWW-Authenticate'), null, 'not the middleware 401');
    assert.equal(deployment.middleware.runs, runs);
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#whoami'), 0);
});

test('MCP-04 Origin null, the endpoint host on another port, or another scheme: 403', async () => {
  const { deployment, call } = await deploy();
  const endpoint = new URL(PLANE_URL);
  for (const origin of ['null', `${endpoint.origin}:8443`, `http://${endpoint.host}`]) {
    const answer = await call('svc-a_whoami', {}, { headers: { Origin: origin } });
    assert.equal(answer.status, 403, origin);
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#whoami'), 0);
});

test('MCP-05 (control) the endpoint origin, an allowed origin and no Origin are served', async () => {
  const { deployment, call, send } = await deploy();
  for (const origin of [new URL(PLANE_URL).origin, APP_ORIGIN, '']) {
    const answer = await call('svc-a_whoami', {}, { headers: { Origin: origin } });
    assert.equal(answer.status, 200, origin || '(no Origin)');
    assert.equal(answer.result.isError, undefined);
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#whoami'), 3);
  // Without publicOrigin, a loopback Host is its own endpoint origin; a rebinding pair (a
  // foreign Host and a matching Origin) is not.
  const loopback = (host: string, origin: string) =>
    new Request(`http://${host}/mcp`, {
      method: 'POST',
      headers: {
        Host: host,
        Origin: origin,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: 'Bearer t-alice',
      },
      body: JSON.stringify(rpc('tools/list')),
    });
  assert.equal((await send(loopback('127.0.0.1:8787', 'http://127.0.0.1:8787'))).status, 200);
  assert.equal((await send(loopback('localhost:3000', 'http://localhost:3000'))).status, 200);
  assert.equal((await send(loopback('[::1]:3000', 'http://[::1]:3000'))).status, 200);
  assert.equal((await send(loopback('evil.example.com', 'http://evil.example.com'))).status, 403);
  assert.equal((await send(loopback('127.0.0.1:8787', 'http://127.0.0.1:9999'))).status, 403);
});

test('MCP-06 GET, PUT and DELETE on /mcp: 405 with Allow: POST, never executed', async () => {
  const { deployment, send } = await deploy();
  for (const method of ['GET', 'PUT', 'DELETE']) {
    const runs = deployment.middleware.runs;
    const answer = await send(
      mcpRequest(rpc('tools/call', { name: 'svc-a_whoami' }), { token: 't-alice', method }),
    );
    assert.equal(answer.status, 405, method);
    assert.equal(answer.headers.get('Allow'), 'POST');
    assert.equal(deployment.middleware.runs, runs);
  }
  assert.equal(deployment.count('calls', 'svc-a.echo#whoami'), 0);
});

test('MCP-07 malformed JSON and non-JSON-RPC values: parse / invalid-request errors, no stack', async () => {
  const { send } = await deploy();
  const cases: [string, number][] = [
    ['{"jsonrpc":"2.0","id":1,"method":', -32700],
    ['not json at all', -32700],
    ['42', -32600],
    ['"tools/list"', -32600],
    ['null', -32600],
    ['[]', -32600],
    ['{"jsonrpc":"1.0","id":1,"method":"tools/list"}', -32600],
    ['{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}', -32600],
    ['{"jsonrpc":"2.0","id":1,"method":"tools/list","params":7}', -32600],
  ];
  for (const [body, code] of cases) {
    const answer = await send(mcpRequest(body, { token: 't-alice' }));
    assert.ok(answer.status >= 400 && answer.status < 500, `${body}: ${answer.status}`);
    assert.equal(answer.error?.code, code, body);
    assert.doesNotMatch(answer.text, /\bat [\w.<>]+ \(|node_modules|\.ts:\d+/, body);
  }
});

test('MCP-08 unknown tool and a private ability tool: JSON-RPC error, no service contacted', async () => {
  const { deployment, call } = await deploy();
  // Warm the catalog so only RPC requests could reach the service.
  await call('svc-a_whoami', {});
  const before = deployment.rpcRequests('svc-a').length;
  for (const name of ['no_such_tool', 'svc-a_private_secret']) {
    const answer = await call(name, {});
    assert.equal(answer.status, 200);
    assert.equal(answer.result, undefined, name);
    assert.equal(answer.error.code, -32602, name);
  }
  assert.equal(deployment.rpcRequests('svc-a').length, before);
  assert.equal(deployment.count('calls', 'svc-a.private#secret'), 0);
  assert.equal(deployment.count('factories', 'svc-a.private'), 0);
});

test('MCP-09 item cap: 11 items under maxItems 10, and 10 001 under the default, fail in-band', async () => {
  const small = await deploy({ mcp: { streamLimits: { maxItems: 10 } } });
  const answer = await small.call('svc-a_ticks', { n: 11 });
  assert.equal(answer.status, 200);
  assert.equal(answer.result.isError, true);
  assert.equal(answer.result._meta['svcplane/error'].reason, 'mcp_stream_item_limit');
  // The service's session is closed: the plane cancelled its stream rather than drain it.
  const sockets = small.deployment.sockets['svc-a'].connections;
  assert.ok(sockets.length >= 1);
  for (let i = 0; i < 500 && sockets.some((s) => s.state !== 'closed'); i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(sockets.every((socket) => socket.state === 'closed'));
  const within = await small.call('svc-a_ticks', { n: 10 });
  assert.equal(within.result.structuredContent.items.length, 10);

  const defaults = await deploy();
  const many = await defaults.call('svc-a_ticks', { n: 10_001 });
  assert.equal(many.result.isError, true);
  assert.equal(many.result._meta['svcplane/error'].reason, 'mcp_stream_item_limit');
  assert.ok(many.text.length < 64 * 1024, 'the answer holds no aggregated items');
});

test('MCP-10 byte cap: a 2 MiB item fails in-band; an exhausted progress budget only stops notifications', async () => {
  const { call } = await deploy();
  const big = await call('svc-a_ticks', { n: 1, size: 2 * 1024 * 1024 });
  assert.equal(big.result.isError, true);
  assert.ok(big.text.length < 64 * 1024);

  const { send } = await deploy({ mcp: { streamLimits: { maxBytes: 400 } } });
  const token = 'p'.repeat(100);
  const answer = await send(
    mcpRequest(
      rpc('tools/call', {
        name: 'svc-a_ticks',
        arguments: { n: 5 },
        _meta: { progressToken: token },
      }),
      { token: 't-alice' },
    ),
  );
  const progress = answer.messages.filter((m) => m.method === 'notifications/progress');
  // Each notification is 157 bytes with its token: two fit in 400, the rest are not sent.
  assert.equal(progress.length, 2);
  assert.deepEqual(progress.map((m) => m.params.progress), [1, 2]);
  assert.equal(answer.result.isError, undefined);
  assert.equal(answer.result.structuredContent.items.length, 5);
});

test('MCP-11 MCP responses are never cache-eligible', async () => {
  const { send, call } = await deploy();
  const answers = [
    await send(mcpRequest(rpc('tools/list'), { token: 't-alice' })),
    await call('svc-a_whoami', {}),
    await send(
      mcpRequest(
        rpc('tools/call', {
          name: 'svc-a_ticks',
          arguments: { n: 2 },
          _meta: { progressToken: 1 },
        }),
        { token: 't-alice' },
      ),
    ),
    await send(mcpRequest(rpc('tools/list'), {})),
    await send(mcpRequest(rpc('tools/list'), { token: 't-alice', method: 'GET' })),
    await send(mcpRequest('{', { token: 't-alice' })),
    await call('svc-a_whoami', {}, { headers: { Origin: 'http://evil.test' } }),
    await call('svc-a_whoami', {}, { headers: { 'MCP-Protocol-Version': '1' } }),
  ];
  for (const answer of answers) {
    const cacheControl = answer.headers.get('Cache-Control') ?? '';
    assert.equal(cacheControl, 'no-store', `status ${answer.status}`);
    assert.doesNotMatch(cacheControl, /public|max-age|s-maxage/);
  }
  assert.equal(answers[3].status, 401, 'the middleware answer is no-store too');
});

test('MCP-12 a handler throwing Error("SECRET-…"): opaque in-band failure, marker nowhere', async () => {
  const { deployment, call } = await deploy();
  const answer = await call('svc-a_fail', { kind: 'error' });
  assert.equal(answer.status, 200);
  assert.equal(answer.result.isError, true);
  const record = answer.result._meta['svcplane/error'];
  assert.equal(record.detail, 'Svc ability handler failed: fail');
  assert.equal(record.code, 'internal');
  assert.equal(record.status, 500);
  assert.equal(record.retryable, false);
  assert.ok(!answer.text.includes(deployment.stats.marker));
  assert.ok(!answer.text.includes('postgres://'));
});

test('MCP-13 arguments violating the input schema: in-band validation failure, handler not run', async () => {
  const { deployment, call } = await deploy();
  const answer = await call('svc-a_failShaped', { status: 'not a number', reason: 7 });
  assert.equal(answer.result.isError, true);
  const record = answer.result._meta['svcplane/error'];
  assert.equal(record.code, 'ability_validation');
  assert.equal(record.status, 422);
  assert.ok(Array.isArray(record.issues) && record.issues.length > 0);
  assert.match(answer.result.content[0].text, /ability_validation/);
  assert.equal(deployment.count('calls', 'svc-a.echo#failShaped'), 0);
});
