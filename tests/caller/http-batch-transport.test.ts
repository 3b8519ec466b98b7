import { MAX_SVC_TIMEOUT_MS } from '../../src/core/deadline.ts';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { svcErrorInfo } from '../../src/core/errors.ts';
import {
  abilitySession,
  MAX_CALLS_PER_BATCH,
  type TokenRequest,
} from '../../src/caller/ability-session.ts';
import {
  cloudflareServiceBindingRpc,
  httpBatchRpc,
  MAX_BATCH_RESPONSE_BYTES,
  nextMacrotask,
} from '../../src/caller/transports/http-batch.ts';
import { FAKE_TOKEN, fakeRpcEndpoint, newFakeRecord } from '../support/fake-main.ts';

interface FakeApi {
  echo(input: { value: string }): { value: string };
  whoami(input: Record<string, never>): { transport: string };
}

function countingRequester(token = FAKE_TOKEN) {
  const requests: unknown[] = [];
  const requester = (request: unknown) => {
    requests.push(request);
    return Promise.resolve(token);
  };
  return { requester, requests };
}

function sessionOver(fetch: (request: Request) => Promise<Response>, extra = {}) {
  const { requester, requests } = countingRequester();
  const session = abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['echo'],
    requestToken: requester,
    transport: httpBatchRpc(fetch),
    ...extra,
  });
  return { session, tokenRequests: requests };
}

test('authenticate and the first call travel in one HTTP request', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session } = sessionOver(endpoint.fetch);
  const result = await session.echo({ value: 'hello' });
  assert.deepEqual(result, { value: 'hello' });
  assert.equal(endpoint.requests.length, 1);
  assert.deepEqual(record.authenticated, [{ token: FAKE_TOKEN, proof: undefined }]);
  assert.deepEqual(record.calls, ['echo']);
});

test('calls made in one macrotask share one batch and one authenticate', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session } = sessionOver(endpoint.fetch);
  const results = await Promise.all([
    session.echo({ value: 'a' }),
    session.echo({ value: 'b' }),
    session.whoami({}),
  ]);
  assert.deepEqual(results, [{ value: 'a' }, { value: 'b' }, { transport: 'http-batch' }]);
  assert.equal(endpoint.requests.length, 1);
  assert.equal(record.authenticated.length, 1);
});

test('calls over time on one HTTP-batch session each get a fresh batch and reuse the token', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session, tokenRequests } = sessionOver(endpoint.fetch);
  for (const value of ['one', 'two', 'three']) {
    assert.deepEqual(await session.echo({ value }), { value });
  }
  assert.equal(endpoint.requests.length, 3);
  assert.equal(record.authenticated.length, 3);
  assert.equal(tokenRequests.length, 1);
  const { signal, ...request } = tokenRequests[0] as TokenRequest;
  assert.deepEqual(request, {
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    abilityId: 'fake.echo',
    scopes: ['echo'],
  });
  assert.equal(signal?.aborted, false, 'its answer was used');
});

test('nothing is sent after a batch went out (releases are dropped)', async () => {
  const endpoint = fakeRpcEndpoint();
  const { session } = sessionOver(endpoint.fetch);
  await session.echo({ value: 'x' });
  for (let i = 0; i < 5; i++) await nextMacrotask();
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(endpoint.requests.length, 1);
});

test('metadata travels as X-Request-Id, X-Svc-Timeout, X-Svc-Idempotency-Key, X-Svc-Conn-Info', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const connInfo = JSON.stringify({ address: '203.0.113.9', addressType: 'IPv4' });
  const { session } = sessionOver(endpoint.fetch, {
    requestId: 'req-123',
    timeoutMs: 5_000,
    idempotencyKey: 'retry-2026_01=',
    connInfo,
  });
  await session.echo({ value: 'meta' });
  const headers = record.sessions[0].headers;
  assert.equal(headers['x-request-id'], 'req-123');
  assert.equal(headers['x-svc-idempotency-key'], 'retry-2026_01=');
  assert.equal(headers['x-svc-conn-info'], connInfo);
  const budget = Number(headers['x-svc-timeout']);
  assert.ok(Number.isInteger(budget) && budget > 0 && budget <= 5_000, `budget ${budget}`);
  assert.equal(new URL(endpoint.requests[0].url).search, '');
  for (const value of Object.values(headers)) assert.ok(!value.includes(FAKE_TOKEN));
});

test('an invalid idempotency key and an absent budget are not sent', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session } = sessionOver(endpoint.fetch, { idempotencyKey: 'a b:c' });
  await session.echo({ value: 'meta' });
  const headers = record.sessions[0].headers;
  assert.equal(headers['x-svc-idempotency-key'], undefined);
  assert.equal(headers['x-svc-timeout'], undefined);
  assert.equal(headers['x-request-id'], undefined);
});

test('a string URL target posts to that URL', async () => {
  const endpoint = fakeRpcEndpoint();
  const seen: string[] = [];
  const originalFetch = globalThis.fetch;
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    seen.push(request.url);
    return endpoint.fetch(request);
  }) as typeof fetch;
  try {
    const { requester } = countingRequester();
    const session = abilitySession<FakeApi>({
      abilityId: 'fake.echo',
      callerServiceId: 'caller',
      targetServiceId: 'fake',
      scopes: ['read'],
      requestToken: requester,
      transport: httpBatchRpc('https://fake.example/rpc/custom-path'),
    });
    assert.deepEqual(await session.echo({ value: 'u' }), { value: 'u' });
  } finally {
    globalThis.fetch = originalFetch;
  }
  assert.deepEqual(seen, ['https://fake.example/rpc/custom-path']);
});

test('a fetch-function target defaults to /rpc/<abilityId>', async () => {
  const endpoint = fakeRpcEndpoint();
  const { session } = sessionOver(endpoint.fetch);
  await session.echo({ value: 'p' });
  assert.equal(new URL(endpoint.requests[0].url).pathname, '/rpc/fake.echo');
  assert.equal(endpoint.requests[0].method, 'POST');
});

test('cloudflareServiceBindingRpc sends batches through binding.fetch with the metadata headers', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  let bindingCalls = 0;
  const binding = {
    fetch(request: Request) {
      bindingCalls++;
      return endpoint.fetch(request);
    },
  };
  const { requester } = countingRequester();
  const session = abilitySession<FakeApi>({
    abilityId: 'fake.echo',
    callerServiceId: 'caller',
    targetServiceId: 'fake',
    scopes: ['read'],
    requestToken: requester,
    requestId: 'req-binding',
    transport: cloudflareServiceBindingRpc(binding),
  });
  assert.deepEqual(await session.echo({ value: 'b' }), { value: 'b' });
  assert.equal(bindingCalls, 1);
  assert.equal(record.sessions[0].headers['x-request-id'], 'req-binding');
});

test('cloudflareServiceBindingRpc refuses something that is not a binding', () => {
  assert.throws(
    () => cloudflareServiceBindingRpc({} as never),
    (error: unknown) => svcErrorInfo(error).reason === 'configuration',
  );
});

test('a refused batch rejects with the problem body taxonomy (405 when HTTP-batch is off)', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord(), { transports: ['websocket'] });
  const { session } = sessionOver(endpoint.fetch);
  await assert.rejects(session.echo({ value: 'x' }), (error: unknown) => {
    const info = svcErrorInfo(error);
    assert.equal(info.status, 405);
    assert.equal(info.code, 'internal');
    assert.equal(info.reason, 'rpc_transport_not_enabled');
    return true;
  });
});

test('nextMacrotask runs after pending microtasks', async () => {
  const order: string[] = [];
  const macro = nextMacrotask().then(() => order.push('macrotask'));
  queueMicrotask(() => order.push('microtask'));
  await Promise.resolve().then(() => order.push('then'));
  await macro;
  assert.deepEqual(order, ['microtask', 'then', 'macrotask']);
});

type TimerGlobals = {
  setImmediate?: (callback: () => void) => unknown;
  setTimeout: typeof setTimeout;
};

test('the batch flush uses setImmediate where it exists, never a clamped timer', async () => {
  const globals = globalThis as unknown as TimerGlobals;
  const originalImmediate = globals.setImmediate;
  const originalTimeout = globals.setTimeout;
  let immediates = 0;
  let timers = 0;
  globals.setImmediate = (callback) => {
    immediates++;
    return originalTimeout(callback, 0);
  };
  globals.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    timers++;
    return originalTimeout(...args);
  }) as typeof setTimeout;
  try {
    await nextMacrotask();
  } finally {
    globals.setImmediate = originalImmediate;
    globals.setTimeout = originalTimeout;
    if (originalImmediate === undefined) delete globals.setImmediate;
  }
  assert.equal(immediates, 1);
  assert.equal(timers, 0);
});

test('without setImmediate the batch flush posts a MessageChannel message, not a timer', async () => {
  const globals = globalThis as unknown as TimerGlobals;
  const originalImmediate = globals.setImmediate;
  const originalTimeout = globals.setTimeout;
  let timers = 0;
  delete globals.setImmediate;
  // A flush by timer would be a zero-delay one; the service's batch body deadline is not.
  globals.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    if (!(Number(args[1]) > 0)) timers++;
    return originalTimeout(...args);
  }) as typeof setTimeout;
  try {
    await nextMacrotask();
    const endpoint = fakeRpcEndpoint();
    const { session } = sessionOver(endpoint.fetch);
    assert.deepEqual(await session.echo({ value: 'no immediate' }), { value: 'no immediate' });
  } finally {
    globals.setTimeout = originalTimeout;
    if (originalImmediate !== undefined) globals.setImmediate = originalImmediate;
  }
  assert.equal(timers, 0);
});

test('a redirect answer is never followed: the batch, token included, stays put and fails', async () => {
  const seen: Request[] = [];
  const { session } = sessionOver((request) => {
    seen.push(request);
    // What a runtime's fetch would do for a request that asks to follow redirects.
    if (request.redirect === 'follow') throw new Error('the batch would have been re-posted');
    return Promise.resolve(
      new Response(null, { status: 307, headers: { Location: 'https://elsewhere.example/' } }),
    );
  });
  const failure = await session.echo({ value: 'x' }).then(
    () => undefined,
    (error) => svcErrorInfo(error),
  );
  assert.equal(failure?.reason, 'rpc_request_refused');
  assert.equal(failure?.status, 502);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].redirect, 'manual');
});

test('a batch response past MAX_BATCH_RESPONSE_BYTES fails the batch and is read no further', async () => {
  const chunk = new TextEncoder().encode('x'.repeat(1024 * 1024));
  let pulled = 0;
  const { session } = sessionOver(() =>
    Promise.resolve(
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            pulled += chunk.byteLength;
            controller.enqueue(chunk);
          },
        }),
      ),
    )
  );
  const failure = await session.echo({ value: 'x' }).then(
    () => undefined,
    (error) => svcErrorInfo(error),
  );
  assert.equal(failure?.reason, 'rpc_response_too_large');
  assert.ok(pulled > MAX_BATCH_RESPONSE_BYTES, 'the limit was reached');
  assert.ok(pulled <= MAX_BATCH_RESPONSE_BYTES + 4 * chunk.byteLength, `read ${pulled} bytes`);
});

test('an answer with far more lines than the batch sent is refused before the session reads it', async () => {
  // Harmless lines, but each runs through the caller's session in one go: 200 000 of them for
  // one call is work a hostile service would make the caller do.
  const flood = Array.from({ length: 200_000 }, () => '["pull",0]').join('\n');
  const { session } = sessionOver(() => Promise.resolve(new Response(flood)), { timeoutMs: 5_000 });
  const started = Date.now();
  const failure = await session.echo({ value: 'x' }).then(
    () => undefined,
    (error) => svcErrorInfo(error),
  );
  assert.equal(failure?.reason, 'rpc_response_too_large');
  assert.equal(failure?.status, 502);
  assert.ok(Date.now() - started < 2_000, `refused after ${Date.now() - started} ms`);
});

test('calls made at once beyond MAX_CALLS_PER_BATCH go out in several batches the service accepts', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session } = sessionOver(endpoint.fetch);
  const count = 2 * MAX_CALLS_PER_BATCH + 500;
  const results = await Promise.all(
    Array.from({ length: count }, (_, i) => session.echo({ value: String(i) })),
  );
  assert.deepEqual(results.map((result) => result.value), results.map((_, i) => String(i)));
  assert.equal(endpoint.requests.length, 3, 'three batches');
  assert.equal(record.calls.length, count);
});

test('a budget past the timer range does not fire at once', async () => {
  const record = newFakeRecord();
  const endpoint = fakeRpcEndpoint(record);
  const { session } = sessionOver(endpoint.fetch, { timeoutMs: 2 ** 31 });
  assert.deepEqual(await session.echo({ value: 'in time' }), { value: 'in time' });
  // What goes out is what the service would clamp it to anyway.
  const budgets = endpoint.requests.map((request) => request.headers.get('X-Svc-Timeout'));
  assert.deepEqual(budgets, [String(MAX_SVC_TIMEOUT_MS)]);
});

test('a service calling what the caller offers its batch is refused, and the call still answers', async () => {
  const endpoint = fakeRpcEndpoint(newFakeRecord());
  // Before its real answer, the service pushes a call on the caller's main (import 0 on its
  // side) for each name, and pulls every one: none is a method the caller offers.
  const names = ['anything', 'constructor', 'toString', '__proto__', 'then', 'echo'];
  const { session } = sessionOver(async (request) => {
    const answer = await (await endpoint.fetch(request)).text();
    const hostile = names.flatMap((name, index) => [
      JSON.stringify(['push', ['pipeline', 0, [name], []]]),
      JSON.stringify(['pull', index + 1]),
    ]);
    return new Response([...hostile, answer].join('\n'));
  });
  assert.deepEqual(await session.echo({ value: 'still answered' }), { value: 'still answered' });
  assert.deepEqual(await session.echo({ value: 'and again' }), { value: 'and again' });
});
