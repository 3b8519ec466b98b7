import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import {
  cloudflareServiceBinding,
  type EndpointRpcKind,
  httpService,
  localService,
  type ServiceEndpoint,
  validateGrants,
  validateServiceEndpoint,
} from '../../src/plane/endpoints.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';

type Capture = { requests: Request[]; fetch: (request: Request) => Promise<Response> };

function capture(answer: () => Response = () => new Response('{}')): Capture {
  const requests: Request[] = [];
  return {
    requests,
    fetch: (request) => {
      requests.push(request);
      return Promise.resolve(answer());
    },
  };
}

const grants = [{ caller: 'caller-1', scopes: ['svc-a.read'] }];

function refusesNaming(build: () => unknown, field: RegExp): void {
  assert.throws(build, (error: unknown) => {
    assert.ok(error instanceof SvcConfigurationError, `expected a configuration error: ${error}`);
    assert.match(error.message, field);
    return true;
  });
}

/** Opens an HTTP-batch session and makes one call so a batch goes out; returns when it settles. */
async function sendOneBatch(endpoint: ServiceEndpoint, rpcPath: string): Promise<void> {
  const session = endpoint.rpcTransport(rpcPath, 'http-batch').open({ requestId: 'req-b' });
  try {
    await session.main.authenticate('token-value');
  } catch {
    // The fake answers no RPC: only the outgoing request matters here.
  } finally {
    session.close();
  }
}

test('httpService fetches discovery below the base URL path, with the request id and the signal', async () => {
  const seen = capture();
  const endpoint = httpService({
    id: 'svc-a',
    url: 'https://a.example/base/',
    grants,
    fetch: seen.fetch,
  });
  const controller = new AbortController();
  await endpoint.fetchDiscovery({ signal: controller.signal, requestId: 'req-1' });
  const [request] = seen.requests;
  assert.equal(request.url, 'https://a.example/base/.well-known/svc/service.json');
  assert.equal(request.method, 'GET');
  assert.equal(request.headers.get('x-request-id'), 'req-1');
  assert.equal(request.redirect, 'manual');
  controller.abort();
  assert.equal(request.signal.aborted, true);
  await endpoint.fetchDiscovery({ signal: new AbortController().signal });
  assert.equal(seen.requests[1].headers.get('x-request-id'), null);
});

test('httpService HTTP-batch posts to the ability route below the base URL through its fetch', async () => {
  const seen = capture(() => new Response('', { status: 500 }));
  const endpoint = httpService({
    id: 'svc-a',
    url: 'http://a.example/base',
    grants,
    fetch: seen.fetch,
  });
  await sendOneBatch(endpoint, '/rpc/svc-a.main');
  const [request] = seen.requests;
  assert.equal(request.url, 'http://a.example/base/rpc/svc-a.main');
  assert.equal(request.method, 'POST');
  assert.equal(request.headers.get('x-request-id'), 'req-b');
  assert.doesNotMatch(request.url, /token-value/);
});

test('httpService WebSocket dials ws(s) on the same route through createWebSocket', () => {
  const dialled: string[] = [];
  const endpoint = httpService({
    id: 'svc-a',
    url: 'https://a.example/base',
    grants,
    createWebSocket: (url) => {
      dialled.push(url);
      throw new Error('no socket in this test');
    },
  });
  const transport = endpoint.rpcTransport('/rpc/svc-a.main', 'websocket');
  assert.equal(transport.kind, 'websocket');
  assert.throws(() => transport.open({ requestId: 'req-w' }), /no socket in this test/);
  const url = new URL(dialled[0]);
  assert.equal(url.protocol, 'wss:');
  assert.equal(url.pathname, '/base/rpc/svc-a.main');
  assert.equal(url.searchParams.get('request_id'), 'req-w');
});

test('httpService without createWebSocket has a WebSocket route only where a global WebSocket exists', () => {
  const endpoint = httpService({ id: 'svc-a', url: 'https://a.example', grants });
  if (typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function') {
    assert.equal(endpoint.rpcTransport('/rpc/svc-a.main', 'websocket').kind, 'websocket');
    return;
  }
  // Node 20: refused when the transport is asked for, not later when a session opens it.
  assert.throws(
    () => endpoint.rpcTransport('/rpc/svc-a.main', 'websocket'),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'websocket_unavailable',
  );
});

/** RPC paths that would leave the service's base path or origin, or shadow its own routes. */
const ESCAPING_RPC_PATHS = [
  'rpc/x',
  '//evil.example/rpc',
  '/rpc//x',
  '',
  '/',
  '/../svc-b/rpc/x',
  '/rpc/../../svc-b/x',
  '/./rpc/x',
  '/rpc/x/..',
  '/%2e%2e/svc-b/rpc/x',
  '/rpc/%2Fx',
  '/\\evil.example/rpc/x',
  '/rpc\\..\\x',
  '/.well-known/svc/service.json',
  '/.well-known/svc',
  42,
];

function refusesRpcPath(endpoint: ServiceEndpoint, path: unknown, kind: EndpointRpcKind): void {
  assert.throws(
    () => endpoint.rpcTransport(path as string, kind),
    (error: unknown) => {
      assert.ok(error instanceof SvcConfigurationError, `${JSON.stringify(path)}: ${error}`);
      assert.equal(error.reason, 'invalid_rpc_path', JSON.stringify(path));
      return true;
    },
  );
}

test('rpcTransport refuses RPC paths that could leave the service, on every endpoint kind', () => {
  const seen = capture();
  const dialled: string[] = [];
  const createWebSocket = (url: string): WebSocket => {
    dialled.push(url);
    throw new Error('never dialled');
  };
  const endpoints = [
    httpService({ id: 'svc-a', url: 'https://gw.example/svc-a/', grants, fetch: seen.fetch }),
    httpService({ id: 'svc-a', url: 'https://a.example', grants, createWebSocket }),
    cloudflareServiceBinding({ id: 'svc-a', binding: seen, grants, createWebSocket }),
    localService({ id: 'svc-a', service: fetchOnlyService(seen.fetch), grants }),
  ];
  for (const endpoint of endpoints) {
    for (const path of ESCAPING_RPC_PATHS) {
      refusesRpcPath(endpoint, path, 'http-batch');
      if (endpoint.kind !== 'local') refusesRpcPath(endpoint, path, 'websocket');
    }
  }
  assert.equal(seen.requests.length, 0, 'nothing was sent');
  assert.deepEqual(dialled, [], 'nothing was dialled');
});

test('a binding endpoint dials its WebSocket leg on the internal origin, below the route', () => {
  const dialled: string[] = [];
  const endpoint = cloudflareServiceBinding({
    id: 'svc-a',
    binding: capture(),
    grants,
    createWebSocket: (url) => {
      dialled.push(url);
      throw new Error('no socket in this test');
    },
  });
  const transport = endpoint.rpcTransport('/rpc/svc-a.main', 'websocket');
  assert.throws(() => transport.open({}), /no socket in this test/);
  const url = new URL(dialled[0]);
  assert.equal(url.origin, 'wss://svc.internal');
  assert.equal(url.pathname, '/rpc/svc-a.main');
});

test('rpcTransport accepts literal paths below the base, a trailing slash included', async () => {
  const seen = capture(() => new Response('', { status: 500 }));
  const endpoint = httpService({
    id: 'svc-a',
    url: 'https://gw.example/svc-a/',
    grants,
    fetch: seen.fetch,
  });
  for (const path of ['/rpc/svc-a.main', '/v1/rpc_x/', '/a-b/c~d/.well-known/svc']) {
    await sendOneBatch(endpoint, path);
    assert.equal(seen.requests.at(-1)!.url, `https://gw.example/svc-a${path}`);
  }
});

test('rpcTransport refuses unknown transport kinds', () => {
  const endpoint = httpService({
    id: 'svc-a',
    url: 'https://a.example',
    grants,
    fetch: capture().fetch,
  });
  assert.throws(
    () => endpoint.rpcTransport('/rpc/x', 'smoke' as 'http-batch'),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'invalid_rpc_transport',
  );
});

test('httpService refuses bad ids and URLs with a configuration error naming the field', () => {
  for (const id of ['', 'svc.a', 'svc a', '-svc', 'x'.repeat(129), 7]) {
    refusesNaming(
      () => httpService({ id: id as string, url: 'https://a.example', grants }),
      /`id`/,
    );
  }
  for (
    const url of [
      'a.example',
      'ftp://a.example',
      'https://user:pw@a.example',
      'https://a.example/?q=1',
      'https://a.example/#x',
      42,
    ]
  ) {
    refusesNaming(() => httpService({ id: 'svc-a', url: url as string, grants }), /`url`/);
  }
  refusesNaming(
    () => httpService({ id: 'svc-a', url: 'https://a.example', grants, fetch: 'x' as never }),
    /`fetch`/,
  );
  refusesNaming(
    () =>
      httpService({ id: 'svc-a', url: 'https://a.example', grants, createWebSocket: 1 as never }),
    /`createWebSocket`/,
  );
  refusesNaming(() => httpService(null as never), /options/);
});

test('grants: callers and scopes are checked, wildcards and duplicate callers refused', () => {
  const bad: [unknown, RegExp][] = [
    [undefined, /`grants`/],
    [{ caller: 'x', scopes: ['a'] }, /`grants`/],
    [[null], /grants\[0\]/],
    [[{ caller: '', scopes: ['a'] }], /grants\[0\]\.caller/],
    [[{ caller: 'a b', scopes: ['a'] }], /grants\[0\]\.caller/],
    [[{ caller: 5, scopes: ['a'] }], /grants\[0\]\.caller/],
    [[{ caller: 'x', scopes: [] }], /grants\[0\]\.scopes/],
    [[{ caller: 'x', scopes: 'a' }], /grants\[0\]\.scopes/],
    [[{ caller: 'x', scopes: ['a', ''] }], /grants\[0\]\.scopes\[1\]/],
    [[{ caller: 'x', scopes: ['*'] }], /grants\[0\]\.scopes\[0\].*wildcard/],
    [[{ caller: 'x', scopes: ['svc-a.*'] }], /wildcard/],
    [[{ caller: 'x', scopes: ['a'], extra: true }], /`grants\[0\]`: unknown field `extra`/],
    [
      [{ caller: 'x', scopes: ['a'] }, { caller: 'x', scopes: ['b'] }],
      /grants\[1\]\.caller.*repeats caller "x"/,
    ],
  ];
  for (const [value, field] of bad) {
    refusesNaming(
      () => httpService({ id: 'svc-a', url: 'https://a.example', grants: value as never }),
      field,
    );
  }
});

test('grants are kept sorted, de-duplicated and frozen', () => {
  const endpoint = localService({
    id: 'svc-a',
    service: fetchOnlyService(() => Promise.resolve(new Response('{}'))),
    grants: [{ caller: 'caller-1', scopes: ['svc-a.write', 'svc-a.read', 'svc-a.write'] }],
  });
  assert.deepEqual(endpoint.grants, [{
    caller: 'caller-1',
    scopes: ['svc-a.read', 'svc-a.write'],
  }]);
  assert.ok(Object.isFrozen(endpoint));
  assert.ok(Object.isFrozen(endpoint.grants));
  assert.ok(Object.isFrozen(endpoint.grants[0].scopes));
  assert.throws(() => (endpoint.grants[0].scopes as string[]).push('svc-a.admin'));
  assert.deepEqual(validateGrants([], 'test'), []);
});

test('cloudflareServiceBinding: discovery and HTTP-batch go through binding.fetch', async () => {
  const seen = capture(() => new Response('', { status: 500 }));
  const endpoint = cloudflareServiceBinding({
    id: 'svc-b',
    binding: { fetch: seen.fetch },
    grants,
  });
  assert.equal(endpoint.kind, 'cloudflare-binding');
  await endpoint.fetchDiscovery({ signal: new AbortController().signal, requestId: 'req-2' });
  assert.equal(new URL(seen.requests[0].url).pathname, '/.well-known/svc/service.json');
  assert.equal(seen.requests[0].headers.get('x-request-id'), 'req-2');
  await sendOneBatch(endpoint, '/custom/path');
  assert.equal(new URL(seen.requests[1].url).pathname, '/custom/path');
  assert.equal(seen.requests[1].method, 'POST');
});

const refusedData = { code: 'internal', status: 503, retryable: true, message: 'down' };

test('cloudflareServiceBinding never infers abilityRpc and needs createWebSocket for WebSocket', () => {
  const binding = { fetch: capture().fetch, connectAbility: () => ({}) };
  const plain = cloudflareServiceBinding({ id: 'svc-b', binding, grants });
  assert.equal(plain.abilityRpc, undefined);
  assert.equal('abilityRpc' in plain, false);
  const native = { connectAbility: () => Promise.resolve({ error: refusedData }) };
  assert.equal(
    cloudflareServiceBinding({ id: 'svc-b', binding, grants, abilityRpc: native }).abilityRpc,
    native,
  );
  // Without abilityRpc there is no native route; with one, a binding without connectAbility is refused.
  assert.throws(
    () => plain.rpcTransport('/rpc/svc-b.main', 'cloudflare-binding-rpc'),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'native_binding_unavailable',
  );
  assert.throws(
    () => cloudflareServiceBinding({ id: 'svc-b', binding, grants, abilityRpc: {} as never }),
    (error: unknown) => error instanceof SvcConfigurationError && /abilityRpc/.test(error.message),
  );
  assert.throws(
    () => plain.rpcTransport('/rpc/svc-b.main', 'websocket'),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'websocket_unavailable',
  );
  const withSockets = cloudflareServiceBinding({
    id: 'svc-b',
    binding,
    grants,
    createWebSocket: () => {
      throw new Error('dialled');
    },
  });
  assert.equal(withSockets.rpcTransport('/rpc/svc-b.main', 'websocket').kind, 'websocket');
  refusesNaming(
    () => cloudflareServiceBinding({ id: 'svc-b', binding: {} as never, grants }),
    /`binding`/,
  );
});

test('localService calls service.fetch in-process for discovery and HTTP-batch; no WebSocket', async () => {
  const seen = capture(() => new Response('', { status: 500 }));
  const endpoint = localService({ id: 'svc-l', service: fetchOnlyService(seen.fetch), grants });
  assert.equal(endpoint.kind, 'local');
  await endpoint.fetchDiscovery({ signal: new AbortController().signal });
  assert.equal(new URL(seen.requests[0].url).pathname, '/.well-known/svc/service.json');
  await sendOneBatch(endpoint, '/rpc/svc-l.main');
  assert.equal(new URL(seen.requests[1].url).pathname, '/rpc/svc-l.main');
  assert.throws(
    () => endpoint.rpcTransport('/rpc/svc-l.main', 'websocket'),
    (error: unknown) =>
      error instanceof SvcConfigurationError && error.reason === 'websocket_unavailable',
  );
  refusesNaming(() => localService({ id: 'svc-l', service: {} as never, grants }), /`service`/);
});

test('validateServiceEndpoint accepts built and well-formed hand-written endpoints only', () => {
  const built = localService({ id: 'svc-l', service: fetchOnlyService(capture().fetch), grants });
  assert.equal(validateServiceEndpoint(built, 'test'), built);
  const handWritten: ServiceEndpoint = {
    id: 'svc-h',
    kind: 'http',
    grants,
    fetchDiscovery: () => Promise.resolve(new Response('{}')),
    rpcTransport: () => {
      throw new Error('unused');
    },
  };
  assert.equal(validateServiceEndpoint(handWritten, 'test'), handWritten);
  const bad: [unknown, RegExp][] = [
    [null, /endpoint/],
    [{ ...handWritten, id: 'bad id' }, /`id`/],
    [{ ...handWritten, kind: 'smtp' }, /`kind`/],
    [{ ...handWritten, fetchDiscovery: undefined }, /`fetchDiscovery`/],
    [{ ...handWritten, rpcTransport: 'x' }, /`rpcTransport`/],
    [{ ...handWritten, grants: [{ caller: 'x', scopes: ['*'] }] }, /wildcard/],
  ];
  for (const [value, field] of bad) {
    refusesNaming(() => validateServiceEndpoint(value, 'test'), field);
  }
});
