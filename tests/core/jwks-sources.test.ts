import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signCapabilityToken, verifyCapabilityToken } from '../../src/core/capability-token.ts';
import { SvcConfigurationError, SvcInternalError } from '../../src/core/errors.ts';
import { jwksFromServiceBinding, jwksFromUrl, staticJwks } from '../../src/service/jwks-sources.ts';
import { baselineClaims, TEST_ISSUER } from '../support/forge.ts';
import { testKeys } from '../support/keys.ts';

const URL_ = 'https://plane.test/.well-known/svc/jwks.json';

type Answer = () => Response | Promise<Response>;

/** A fetch stand-in that answers with the current `answer` and counts requests. */
function fakeFetch(answer: Answer) {
  const state = { calls: 0, answer, urls: [] as string[] };
  const fetchImpl = ((input: RequestInfo | URL) => {
    state.calls++;
    state.urls.push(String(input));
    return Promise.resolve(state.answer());
  }) as typeof fetch;
  return { state, fetch: fetchImpl };
}

async function publishedJwks() {
  const { k1, k2 } = await testKeys();
  return { keys: [k1.publicJwk, k2.publicJwk] };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function assertUnavailable(promise: Promise<unknown>, label: string) {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof SvcInternalError, `${label}: ${String(error)}`);
    assert.equal(error.status, 503, label);
    assert.equal(error.retryable, true, label);
    assert.equal(error.reason, 'jwks_unavailable', label);
    return true;
  });
}

test('jwksFromUrl fetches once and serves lookups from the cache for the TTL', async () => {
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => Response.json(jwks));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch });
  const k1 = await keySet.getKey('k1');
  assert.equal(k1?.type, 'public');
  assert.equal(await keySet.getKey('k1'), k1, 'the same imported key object');
  assert.ok(await keySet.getKey('k2'));
  assert.deepEqual(fake.state.urls, [URL_]);
});

test('concurrent lookups share one fetch', async () => {
  const jwks = await publishedJwks();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const fake = fakeFetch(async () => {
    await gate;
    return Response.json(jwks);
  });
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch });
  const lookups = Array.from({ length: 10 }, (_, i) => keySet.getKey(i % 2 ? 'k1' : 'k2'));
  release();
  const keys = await Promise.all(lookups);
  assert.ok(keys.every((key) => key !== undefined));
  assert.equal(fake.state.calls, 1);
});

test('an unknown kid does not refetch until the cache expires', async () => {
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => Response.json(jwks));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch, cacheTtlSeconds: 0.2 });
  assert.ok(await keySet.getKey('k1'));
  for (const kid of ['k3', 'k4', 'k5']) assert.equal(await keySet.getKey(kid), undefined);
  assert.equal(fake.state.calls, 1);
  await sleep(300);
  assert.equal(await keySet.getKey('k3'), undefined);
  assert.equal(fake.state.calls, 2, 'refetched once after the TTL');
});

test('a failed fetch is kept only for failureCooldownMs: lookups fail without a fetch, then one retries', async () => {
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => {
    throw new TypeError('connection refused');
  });
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch, failureCooldownMs: 100 });
  await assertUnavailable(keySet.getKey('k1'), 'network failure');
  fake.state.answer = () => Response.json(jwks);
  await assertUnavailable(keySet.getKey('k1'), 'within the cooldown');
  assert.equal(fake.state.calls, 1, 'no fetch within the cooldown');
  await sleep(150);
  assert.ok(await keySet.getKey('k1'));
  assert.equal(fake.state.calls, 2);
});

test('a flood of tokens while the JWKS fails costs one fetch per cooldown, not one per token', async () => {
  const fake = fakeFetch(() => new Response('down', { status: 503 }));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch });
  for (let i = 0; i < 200; i++) {
    await assertUnavailable(keySet.getKey(`forged-${i}`), `lookup ${i}`);
  }
  assert.equal(fake.state.calls, 1, 'the default cooldown holds the retry back');
});

test('with failureCooldownMs 0 the next lookup after a failure fetches again', async () => {
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => new Response('down', { status: 503 }));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch, failureCooldownMs: 0 });
  await assertUnavailable(keySet.getKey('k1'), 'first failure');
  fake.state.answer = () => Response.json(jwks);
  // Date.now() may not have moved yet (workerd's clock advances only across I/O).
  await sleep(5);
  assert.ok(await keySet.getKey('k1'));
  assert.equal(fake.state.calls, 2);
});

test('unusable JWKS answers fail closed with jwks_unavailable', async () => {
  const { k1 } = await testKeys();
  const answers: [string, Answer][] = [
    ['HTTP 500', () => new Response('oops', { status: 500 })],
    ['not JSON', () => new Response('<html>', { status: 200 })],
    ['not a JWKS', () => Response.json({ keys: 'none' })],
    ['private key published', () => Response.json({ keys: [k1.privateJwk] })],
    ['too large', () => new Response(' '.repeat(300 * 1024), { status: 200 })],
  ];
  for (const [label, answer] of answers) {
    const keySet = jwksFromUrl(URL_, { fetch: fakeFetch(answer).fetch });
    await assertUnavailable(keySet.getKey('k1'), label);
  }
});

test('after a refresh fails, the previous keys are not served', async () => {
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => Response.json(jwks));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch, cacheTtlSeconds: 0 });
  assert.ok(await keySet.getKey('k1'));
  fake.state.answer = () => new Response('down', { status: 503 });
  await assertUnavailable(keySet.getKey('k1'), 'refresh failed');
});

test('a JWKS fetch that hangs fails after fetchTimeoutMs', async () => {
  const hanging =
    ((_input: RequestInfo | URL, init?: RequestInit) =>
      new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      })) as typeof fetch;
  const keySet = jwksFromUrl(URL_, { fetch: hanging, fetchTimeoutMs: 50 });
  await assertUnavailable(keySet.getKey('k1'), 'timeout');
});

/** Fails the test instead of hanging when `promise` has not settled within `ms`. */
function settlesWithin<T>(promise: Promise<T>, ms: number, label: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label}: still pending after ${ms} ms`)), ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** A 200 answer whose body sends `prefix` and then stalls; `cancelled` settles once released. */
function stalledAnswer(prefix: string) {
  let markCancelled!: () => void;
  const cancelled = new Promise<void>((resolve) => (markCancelled = resolve));
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(prefix));
    },
    cancel() {
      markCancelled();
    },
  });
  return { response: new Response(body, { status: 200 }), cancelled };
}

test('a binding that ignores the abort signal fails after fetchTimeoutMs; the next lookup retries', async () => {
  const jwks = await publishedJwks();
  let calls = 0;
  const binding = {
    fetch: (_request: Request) => {
      calls++;
      return calls === 1 ? new Promise<Response>(() => {}) : Promise.resolve(Response.json(jwks));
    },
  };
  const keySet = jwksFromServiceBinding(binding, { fetchTimeoutMs: 20, failureCooldownMs: 0 });
  await settlesWithin(assertUnavailable(keySet.getKey('k1'), 'hung binding'), 5000, 'first lookup');
  assert.ok(await settlesWithin(keySet.getKey('k1'), 5000, 'lookup after the timeout'));
  assert.equal(calls, 2);
});

test('a JWKS body that stalls after the headers fails after fetchTimeoutMs and is released', async () => {
  const stalled = stalledAnswer('{"keys":[');
  const keySet = jwksFromUrl(URL_, {
    fetch: () => Promise.resolve(stalled.response),
    fetchTimeoutMs: 20,
  });
  await settlesWithin(assertUnavailable(keySet.getKey('k1'), 'stalled body'), 5000, 'lookup');
  await settlesWithin(stalled.cancelled, 5000, 'body cancellation');
});

test('an answer arriving after the deadline is not read: its body is cancelled', async () => {
  const stalled = stalledAnswer('{"keys":[');
  let answer!: (response: Response) => void;
  const late = new Promise<Response>((resolve) => (answer = resolve));
  const keySet = jwksFromUrl(URL_, { fetch: () => late, fetchTimeoutMs: 20 });
  await settlesWithin(assertUnavailable(keySet.getKey('k1'), 'late answer'), 5000, 'lookup');
  answer(stalled.response);
  await settlesWithin(stalled.cancelled, 5000, 'body cancellation');
});

test('unchanged keys keep their CryptoKey across refreshes, so cached verifications survive', async () => {
  const { k1 } = await testKeys();
  const jwks = await publishedJwks();
  const fake = fakeFetch(() => Response.json(jwks));
  const keySet = jwksFromUrl(URL_, { fetch: fake.fetch, cacheTtlSeconds: 0 });
  const first = await keySet.getKey('k1');
  assert.equal(await keySet.getKey('k1'), first);
  assert.ok(fake.state.calls >= 2);
  const token = await signCapabilityToken(baselineClaims() as never, {
    kid: 'k1',
    privateKey: k1.privateKey,
  });
  const options = { keys: keySet, issuer: TEST_ISSUER, audience: 'svc-a' };
  await verifyCapabilityToken(token, options);
  assert.equal((await verifyCapabilityToken(token, options)).identity.serviceId, 'svc-caller');
});

test('jwksFromServiceBinding sends a GET Request through the binding', async () => {
  const jwks = await publishedJwks();
  const seen: Request[] = [];
  const binding = {
    fetch(request: Request) {
      seen.push(request);
      return Promise.resolve(Response.json(jwks));
    },
  };
  assert.ok(await jwksFromServiceBinding(binding).getKey('k2'));
  assert.equal(seen[0].url, 'https://control-plane/.well-known/svc/jwks.json');
  assert.equal(seen[0].method, 'GET');
  assert.match(seen[0].headers.get('accept') ?? '', /application\/jwk-set\+json/);
  const custom = jwksFromServiceBinding(binding, { url: 'https://plane.internal/keys' });
  assert.ok(await custom.getKey('k1'));
  assert.equal(seen[1].url, 'https://plane.internal/keys');
});

test('staticJwks validates at once and imports on first use', async () => {
  const { k1 } = await testKeys();
  const jwks = await publishedJwks();
  const keySet = staticJwks(jwks);
  assert.equal((await keySet.getKey('k1'))?.type, 'public');
  assert.equal(await keySet.getKey('missing'), undefined);
  assert.throws(() => staticJwks({ keys: [k1.privateJwk] }), SvcConfigurationError);
  assert.throws(() => staticJwks(undefined), SvcConfigurationError);
});

test('remote sources refuse bad configuration', () => {
  const fetchImpl = fakeFetch(() => new Response()).fetch;
  assert.throws(() => jwksFromUrl('not a url', { fetch: fetchImpl }), SvcConfigurationError);
  assert.throws(() => jwksFromUrl('file:///etc/jwks', { fetch: fetchImpl }), SvcConfigurationError);
  // Credentials in the URL would end up in logs, and `fetch` refuses them on every refresh.
  assert.throws(
    () => jwksFromUrl('https://user:secret@plane.test/jwks.json', { fetch: fetchImpl }),
    (error: unknown) =>
      error instanceof SvcConfigurationError && /must not carry credentials/.test(error.message) &&
      !error.message.includes('secret'),
  );
  assert.throws(
    () => jwksFromUrl(URL_, { fetch: fetchImpl, cacheTtlSeconds: -1 }),
    SvcConfigurationError,
  );
  assert.throws(
    () => jwksFromUrl(URL_, { fetch: fetchImpl, cacheTtlSeconds: Number.NaN }),
    SvcConfigurationError,
  );
  assert.throws(() => jwksFromServiceBinding({} as never), SvcConfigurationError);
  // A timer cannot wait past 2^31 - 1 ms: a larger delay would fire at once on every fetch.
  for (const fetchTimeoutMs of [0, 1.5, 2 ** 31, Number.POSITIVE_INFINITY]) {
    assert.throws(
      () => jwksFromUrl(URL_, { fetch: fetchImpl, fetchTimeoutMs }),
      /fetchTimeoutMs must be an integer from 1 to 2147483647/,
      `fetchTimeoutMs ${fetchTimeoutMs}`,
    );
  }
  for (const failureCooldownMs of [-1, 0.5, 2 ** 31]) {
    assert.throws(
      () => jwksFromServiceBinding({ fetch: fetchImpl }, { failureCooldownMs }),
      /failureCooldownMs must be an integer from 0 to 2147483647/,
      `failureCooldownMs ${failureCooldownMs}`,
    );
  }
});

test('a JWKS redirect is never followed: the keys come from the configured place or not at all', async () => {
  const inits: (RequestInit | undefined)[] = [];
  const redirecting = ((_input: RequestInfo | URL, init?: RequestInit) => {
    inits.push(init);
    return Promise.resolve(
      new Response(null, { status: 302, headers: { Location: 'https://keys.elsewhere/' } }),
    );
  }) as typeof fetch;
  await assertUnavailable(jwksFromUrl(URL_, { fetch: redirecting }).getKey('k1'), 'url');
  assert.equal(inits[0]?.redirect, 'manual');
  const requests: Request[] = [];
  const binding = {
    fetch(request: Request) {
      requests.push(request);
      return Promise.resolve(new Response(null, { status: 307, headers: { Location: '/x' } }));
    },
  };
  await assertUnavailable(jwksFromServiceBinding(binding).getKey('k1'), 'binding');
  assert.equal(requests[0].redirect, 'manual');
});
