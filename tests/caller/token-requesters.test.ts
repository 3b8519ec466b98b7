/**
 * The three shipped token requesters against the real token endpoint (in-process `fetch`) and a
 * stand-in service binding: caching, single flight, renewal, local subject refusal and error
 * rebuilding. Plus the token cache on its own clock.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CapabilityAuthError, SvcConfigurationError, svcErrorInfo } from '../../src/core/errors.ts';
import { verifyCapabilityProof } from '../../src/service/proof-verify.ts';
import {
  capabilityTokenCacheKey,
  createCapabilityTokenCache,
  STALLED_TOKEN_FETCH_MS,
} from '../../src/caller/token-request-cache.ts';
import {
  capabilityTokenEndpointUrl,
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
  controlPlaneRpcTokenRequester,
  tokenEndpointFailure,
} from '../../src/caller/token-requesters.ts';
import { signCompactEs256 } from '../../src/caller/token-request-signing.ts';
import { unsignedRequesterToken } from '../support/forge.ts';
import { withMovableClocks } from '../support/wall-clock.ts';
import {
  type EndpointFixture,
  endpointFixture,
  ISSUER,
  tokenClaims,
} from '../support/token-endpoint-fixture.ts';

const REQUEST = {
  callerServiceId: 'svc-caller',
  targetServiceId: 'svc-a',
  abilityId: 'svc-a.echo',
  scopes: ['svc-a.read'],
};

/** The fixture endpoint as a fetch function, recording every request it receives. */
function planeFetch(fixture: EndpointFixture) {
  const seen: Request[] = [];
  const fetchToken = async (request: Request) => {
    seen.push(request.clone());
    return await fixture.handle(request);
  };
  return { seen, fetchToken };
}

async function hmacRequester(options: { ttlSeconds?: number } = {}) {
  const fixture = await endpointFixture();
  const { seen, fetchToken } = planeFetch(fixture);
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: fixture.secrets.hc1,
    controlPlaneUrl: 'https://plane.test',
    fetch: fetchToken,
    ...options,
  });
  return { fixture, seen, requester };
}

test('the HMAC requester obtains a token and caches it under the normalised key', async () => {
  const { fixture, seen, requester } = await hmacRequester();
  const token = await requester(REQUEST);
  const claims = tokenClaims(token);
  assert.equal(claims.sub, 'svc-caller');
  assert.equal(claims.aud, 'svc-a');
  assert.equal(await requester(REQUEST), token);
  assert.equal(
    await requester({ ...REQUEST, scopes: ['svc-a.read', 'svc-a.read'] }),
    token,
    'duplicate scopes normalise to the same key',
  );
  assert.equal(fixture.issued.length, 1);
  assert.equal(seen[0].url, 'https://plane.test/.well-known/svc/capability-token');
  assert.deepEqual(fixture.issued[0].request, {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    abilityId: 'svc-a.echo',
  });
  assert.notEqual(await requester({ ...REQUEST, abilityId: 'svc-a.other' }), token);
  assert.notEqual(await requester({ ...REQUEST, scopes: ['svc-a.write', 'svc-a.read'] }), token);
  assert.equal(fixture.issued.length, 3);
  const scopeOrder = await requester({ ...REQUEST, scopes: ['svc-a.read', 'svc-a.write'] });
  assert.equal(fixture.issued.length, 3, 'scope order does not change the key');
  assert.deepEqual(tokenClaims(scopeOrder).scp, ['svc-a.read', 'svc-a.write']);
});

test('each token request carries a fresh X-Request-Id', async () => {
  const { seen, requester } = await hmacRequester();
  await requester(REQUEST);
  await requester({ ...REQUEST, abilityId: 'svc-a.other' });
  const ids = seen.map((request) => request.headers.get('X-Request-Id'));
  assert.equal(ids.length, 2);
  assert.notEqual(ids[0], ids[1]);
  for (const id of ids) assert.match(id!, /^[0-9a-f-]{36}$/);
});

test('concurrent requests for one key share a single fetch', async () => {
  const { fixture, requester } = await hmacRequester();
  const tokens = await Promise.all(Array.from({ length: 5 }, () => requester(REQUEST)));
  assert.equal(new Set(tokens).size, 1);
  assert.equal(fixture.issued.length, 1);
});

test('a token the service refused is never handed back from the cache', async () => {
  const { fixture, requester } = await hmacRequester();
  const first = await requester(REQUEST);
  assert.equal(await requester(REQUEST), first, 'cached');
  const renewed = await requester({ ...REQUEST, refusedToken: first });
  assert.notEqual(renewed, first);
  assert.equal(fixture.issued.length, 2);
  // Naming a token that is not the cached one (an older one) changes nothing.
  assert.equal(await requester({ ...REQUEST, refusedToken: first }), renewed);
  assert.equal(fixture.issued.length, 2);
});

test('a short-lived token is reused for half its lifetime, not fetched per request; a TTL is part of the key', async () => {
  const { fixture, requester } = await hmacRequester({ ttlSeconds: 30 });
  const first = await requester(REQUEST);
  assert.equal(await requester(REQUEST), first, 'less than 30 s left, but under half gone');
  assert.equal(fixture.issued.length, 1);
  assert.equal(fixture.issued[0].request.ttlSeconds, 30);
  await requester({ ...REQUEST, ttlSeconds: 300 } as typeof REQUEST);
  await requester({ ...REQUEST, ttlSeconds: 300 } as typeof REQUEST);
  assert.equal(fixture.issued.length, 2);
  assert.equal(fixture.issued[1].request.ttlSeconds, 300);
});

test('the cache renews at a third of the lifetime or 30 s left, whichever comes first', async () => {
  let clock = 1_000_000;
  const cache = createCapabilityTokenCache({ now: () => clock });
  let fetches = 0;
  const fetchFor = (lifetimeMs: number) => () => {
    fetches++;
    return Promise.resolve({ token: `t${fetches}`, lifetimeMs });
  };
  assert.equal(await cache.get('a', fetchFor(120_000)), 't1');
  clock += 79_000;
  assert.equal(await cache.get('a', fetchFor(120_000)), 't1');
  clock += 2_000;
  assert.equal(await cache.get('a', fetchFor(120_000)), 't2', 'under a third left');
  assert.equal(await cache.get('b', fetchFor(60_000)), 't3');
  clock += 29_000;
  assert.equal(await cache.get('b', fetchFor(60_000)), 't3');
  clock += 2_000;
  assert.equal(await cache.get('b', fetchFor(60_000)), 't4', 'under 30 s left');
  // A token of 30 s or less would be due at once by the 30 s margin: it serves half its life.
  assert.equal(await cache.get('c', fetchFor(30_000)), 't5');
  clock += 14_000;
  assert.equal(await cache.get('c', fetchFor(30_000)), 't5');
  clock += 2_000;
  assert.equal(await cache.get('c', fetchFor(30_000)), 't6', 'half of its lifetime gone');
});

/** An RPC requester whose plane answers `t1`, `t2`, ... each living 120 s, counting requests. */
function countingRpcRequester() {
  const plane = { issued: 0 };
  const requester = controlPlaneRpcTokenRequester({
    binding: {
      requestCapabilityToken: () =>
        Promise.resolve({
          token: unsignedRequesterToken({ jti: `t${++plane.issued}` }),
          expiresIn: 120,
        }),
    },
    callerServiceId: 'svc-caller',
  });
  return { plane, requester };
}

test('a wall clock stepped back does not keep an expired token: lifetimes are monotonic', async () => {
  await withMovableClocks(async (moved) => {
    const { plane, requester } = countingRpcRequester();
    assert.equal(await requester(REQUEST), unsignedRequesterToken({ jti: 't1' }));
    // Five minutes really pass (the 120 s token is long expired) while the wall clock steps back.
    moved.monotonicMs = 300_000;
    moved.wallMs = -3_600_000;
    assert.equal(await requester(REQUEST), unsignedRequesterToken({ jti: 't2' }));
    assert.equal(plane.issued, 2);
  });
});

test('a wall clock stepped forward does not throw away a fresh token', async () => {
  await withMovableClocks(async (moved) => {
    const { plane, requester } = countingRpcRequester();
    assert.equal(await requester(REQUEST), unsignedRequesterToken({ jti: 't1' }));
    moved.wallMs = 3_600_000;
    assert.equal(await requester(REQUEST), unsignedRequesterToken({ jti: 't1' }));
    assert.equal(plane.issued, 1);
  });
});

test('a failed fetch is not cached and is not shared with later requests', async () => {
  const cache = createCapabilityTokenCache();
  let attempts = 0;
  const flaky = () => {
    attempts++;
    return attempts === 1
      ? Promise.reject(new Error('transient'))
      : Promise.resolve({ token: 'ok', lifetimeMs: 120_000 });
  };
  await assert.rejects(cache.get('k', flaky), /transient/);
  assert.equal(await cache.get('k', flaky), 'ok');
  assert.equal(await cache.get('k', flaky), 'ok');
  assert.equal(attempts, 2);
});

test('a request that gives up stops waiting; the fetch is aborted once no request waits on it', async () => {
  const cache = createCapabilityTokenCache();
  const fetches: { signal: AbortSignal; answer: (token: string) => void }[] = [];
  const slow = (signal: AbortSignal) =>
    new Promise<{ token: string; lifetimeMs: number }>((resolve) => {
      fetches.push({ signal, answer: (token) => resolve({ token, lifetimeMs: 120_000 }) });
    });
  const first = new AbortController();
  const second = new AbortController();
  const a = cache.get('k', slow, first.signal);
  const b = cache.get('k', slow, second.signal);
  assert.equal(fetches.length, 1, 'shared while every request still waits');
  const reason = new Error('budget spent');
  first.abort(reason);
  await assert.rejects(a, (error) => error === reason);
  assert.equal(fetches[0].signal.aborted, false, 'another request still waits on the fetch');
  // A fetch a request gave up on may never answer: later requests do not join it.
  const c = cache.get('k', slow);
  assert.equal(fetches.length, 2);
  second.abort(reason);
  await assert.rejects(b, (error) => error === reason);
  assert.equal(fetches[0].signal.aborted, true, 'nobody waits on the first fetch any more');
  assert.equal(fetches[1].signal.aborted, false);
  fetches[1].answer('fresh');
  assert.equal(await c, 'fresh');
  assert.equal(await cache.get('k', slow), 'fresh', 'cached');
  // A request whose signal already fired is refused at once and starts nothing.
  const gone = new AbortController();
  gone.abort(reason);
  cache.clear();
  await assert.rejects(cache.get('k', slow, gone.signal), (error) => error === reason);
  assert.equal(fetches.length, 2);
});

test('a fetch given up on but still answering stores its token for every later request', async () => {
  const cache = createCapabilityTokenCache();
  const answers: ((token: string) => void)[] = [];
  const slow = () =>
    new Promise<{ token: string; lifetimeMs: number }>((resolve) => {
      answers.push((token) => resolve({ token, lifetimeMs: 120_000 }));
    });
  const patient = cache.get('k', slow);
  const impatient = new AbortController();
  const gaveUp = cache.get('k', slow, impatient.signal);
  impatient.abort(new Error('budget spent'));
  await assert.rejects(gaveUp, /budget spent/);
  // The patient request still holds the first fetch; the next one fetches anew.
  const next = cache.get('k', slow, new AbortController().signal);
  assert.equal(answers.length, 2);
  answers[0]('slow but sure');
  assert.equal(await patient, 'slow but sure');
  assert.equal(await cache.get('k', slow), 'slow but sure', 'the late answer is cached');
  answers[1]('second');
  assert.equal(await next, 'second');
});

test('a fetch unanswered for STALLED_TOKEN_FETCH_MS is no longer shared; its waiters keep waiting', async () => {
  let clock = 5_000;
  const cache = createCapabilityTokenCache({ now: () => clock });
  const answers: ((token: string) => void)[] = [];
  const slow = () =>
    new Promise<{ token: string; lifetimeMs: number }>((resolve) => {
      answers.push((token) => resolve({ token, lifetimeMs: 120_000 }));
    });
  const early = cache.get('k', slow);
  clock += STALLED_TOKEN_FETCH_MS - 1;
  const joined = cache.get('k', slow);
  assert.equal(answers.length, 1, 'not stalled yet: shared');
  clock += 1;
  const late = cache.get('k', slow);
  assert.equal(answers.length, 2, 'stalled: a later request fetches anew');
  answers[1]('second');
  assert.equal(await late, 'second');
  answers[0]('first, at last');
  assert.equal(await early, 'first, at last');
  assert.equal(await joined, 'first, at last');
});

test('a request without a signal holds the fetch: others giving up never abort it', async () => {
  const cache = createCapabilityTokenCache();
  const signals: AbortSignal[] = [];
  let answer!: (token: string) => void;
  const slow = (signal: AbortSignal) =>
    new Promise<{ token: string; lifetimeMs: number }>((resolve) => {
      signals.push(signal);
      answer = (token) => resolve({ token, lifetimeMs: 120_000 });
    });
  const held = cache.get('k', slow);
  const impatient = new AbortController();
  const gaveUp = cache.get('k', slow, impatient.signal);
  impatient.abort(new Error('gave up'));
  await assert.rejects(gaveUp, /gave up/);
  assert.equal(signals.length, 1);
  assert.equal(signals[0].aborted, false);
  answer('late');
  assert.equal(await held, 'late');
});

test('the HTTP requesters abort a token request no session waits on, so a silent plane does not hold later requests', async () => {
  const fixture = await endpointFixture();
  const aborted: unknown[] = [];
  let calls = 0;
  // The first request reaches a plane that accepted the connection and went silent.
  const fetchToken = (request: Request) => {
    if (++calls > 1) return fixture.handle(request);
    return new Promise<Response>((_, reject) => {
      request.signal.addEventListener('abort', () => {
        aborted.push(request.signal.reason);
        reject(request.signal.reason);
      });
    });
  };
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: fixture.secrets.hc1,
    controlPlaneUrl: 'https://plane.test',
    fetch: fetchToken,
  });
  const giveUp = new AbortController();
  const stalled = requester({ ...REQUEST, signal: giveUp.signal });
  await new Promise((resolve) => setTimeout(resolve, 5));
  const reason = new Error('the call ran out of budget');
  giveUp.abort(reason);
  await assert.rejects(stalled, (error) => error === reason);
  assert.deepEqual(aborted, [reason], 'the fetch to the silent plane was aborted');
  const token = await requester({ ...REQUEST, signal: new AbortController().signal });
  assert.equal(tokenClaims(token).aud, 'svc-a');
  assert.equal(calls, 2);
  await assert.rejects(
    requester({ ...REQUEST, signal: 'soon' as unknown as AbortSignal }),
    (error) => error instanceof SvcConfigurationError && /signal/.test(error.message),
  );
});

test('the cache key covers caller, target, ability, scopes, TTL and the whole subject', () => {
  const base = { callerServiceId: 'c', targetServiceId: 't', scopes: ['b', 'a'] };
  const keys = [
    capabilityTokenCacheKey(base),
    capabilityTokenCacheKey({ ...base, callerServiceId: 'c2' }),
    capabilityTokenCacheKey({ ...base, targetServiceId: 't2' }),
    capabilityTokenCacheKey({ ...base, abilityId: 'x' }),
    capabilityTokenCacheKey({ ...base, ttlSeconds: 60 }),
    capabilityTokenCacheKey({ ...base, subject: { id: 'u' } }),
    capabilityTokenCacheKey({ ...base, subject: { id: 'u', kind: 'api_key' } }),
    capabilityTokenCacheKey({ ...base, subject: { id: 'u', orgId: 'o' } }),
  ];
  assert.equal(new Set(keys).size, keys.length);
  assert.equal(capabilityTokenCacheKey({ ...base, scopes: ['a', 'b', 'a'] }), keys[0]);
});

test('DEL-01 (requesters) all three refuse locally to send a subject', async () => {
  const fixture = await endpointFixture();
  let sent = 0;
  const countingFetch = (request: Request) => {
    sent++;
    return fixture.handle(request);
  };
  const binding = {
    requestCapabilityToken: () => {
      sent++;
      return Promise.resolve('never');
    },
  };
  const jwkKey = fixture.keys.jk1;
  const requesters = [
    controlPlaneHmacTokenRequester({
      clientId: 'hc1',
      clientSecret: fixture.secrets.hc1,
      controlPlaneUrl: ISSUER,
      fetch: countingFetch,
    }),
    controlPlaneJwkTokenRequester({
      clientId: 'jc1',
      keyId: 'jk1',
      privateJwk: jwkKey.privateJwk,
      issuer: ISSUER,
      controlPlaneUrl: ISSUER,
      fetch: countingFetch,
    }),
    controlPlaneRpcTokenRequester({ binding, callerServiceId: 'svc-caller' }),
  ];
  for (const requester of requesters) {
    const withSubject = { ...REQUEST, subject: { id: 'victim', kind: 'user' } };
    await assert.rejects(
      requester(withSubject as typeof REQUEST),
      (error: unknown) =>
        error instanceof CapabilityAuthError && error.status === 403 &&
        error.reason === 'subject_not_allowed',
    );
  }
  assert.equal(sent, 0);
  assert.equal(fixture.issued.length, 0);
});

test('endpoint refusals come back as plain errors with re-validated taxonomy fields', async () => {
  const { requester } = await hmacRequester();
  const error = await requester({ ...REQUEST, targetServiceId: 'svc-unknown' }).then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e as Record<string, unknown>,
  );
  assert.equal(error instanceof CapabilityAuthError, false);
  assert.equal(error.code, 'capability_auth');
  assert.equal(error.status, 403);
  assert.equal(error.retryable, false);
  assert.equal(error.reason, 'unknown_target');
  assert.match(String(error.requestId), /^[0-9a-f-]{36}$/);
  assert.deepEqual(svcErrorInfo(error), {
    code: 'capability_auth',
    status: 403,
    retryable: false,
    reason: 'unknown_target',
  });

  const fixture = await endpointFixture();
  const wrongSecret = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: 'not-the-secret',
    controlPlaneUrl: ISSUER,
    fetch: (request) => fixture.handle(request),
  });
  await assert.rejects(wrongSecret(REQUEST), {
    code: 'capability_auth',
    status: 401,
    reason: 'caller_unauthenticated',
  });
});

test('a peer cannot make a refusal retryable; a body without taxonomy keeps its HTTP status', () => {
  const lying = tokenEndpointFailure(401, {
    code: 'capability_auth',
    status: 401,
    retryable: true,
    detail: 'nope',
  });
  assert.equal((lying as unknown as { retryable: boolean }).retryable, false);
  assert.equal(lying.message, 'nope');
  const gateway = tokenEndpointFailure(502, undefined) as unknown as Record<string, unknown>;
  assert.deepEqual(
    { code: gateway.code, status: gateway.status, retryable: gateway.retryable },
    { code: 'internal', status: 502, retryable: true },
  );
  // A body whose status disagrees with the HTTP status is not believed: the status decides, and
  // the body can only take retryability away.
  const cases: [number, Record<string, unknown>, number, boolean][] = [
    [403, { code: 'internal', status: 503, retryable: true }, 403, false],
    [401, { code: 'timeout', status: 504, retryable: true }, 401, false],
    [503, { code: 'capability_auth', status: 403, retryable: false }, 503, false],
    [503, { code: 'internal', status: 500 }, 503, false],
    [503, { code: 'internal', status: 503 }, 503, true],
  ];
  for (const [httpStatus, body, status, retryable] of cases) {
    const info = svcErrorInfo(tokenEndpointFailure(httpStatus, body));
    assert.deepEqual(
      { status: info.status, retryable: info.retryable },
      { status, retryable },
      `${httpStatus} with ${JSON.stringify(body)}`,
    );
  }
});

test('transport failures and invalid answers are internal errors, never tokens', async () => {
  const unreachable = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: 's',
    controlPlaneUrl: ISSUER,
    fetch: () => Promise.reject(new TypeError('connection refused')),
  });
  await assert.rejects(unreachable(REQUEST), {
    code: 'internal',
    status: 503,
    retryable: true,
    reason: 'control_plane_unreachable',
  });
  const answers = [
    new Response('{"token":""}', { status: 200 }),
    new Response('not json', { status: 200 }),
    new Response(JSON.stringify({ token: 'x'.repeat(70 * 1024) }), { status: 200 }),
  ];
  for (const answer of answers) {
    const requester = controlPlaneHmacTokenRequester({
      clientId: 'hc1',
      clientSecret: 's',
      controlPlaneUrl: ISSUER,
      fetch: () => Promise.resolve(answer),
    });
    await assert.rejects(requester(REQUEST), {
      code: 'internal',
      status: 502,
      reason: 'token_response_invalid',
    });
  }
});

test('controlPlaneUrl may be a base URL, a prefixed base or the endpoint itself', () => {
  const expectations: [string, string][] = [
    ['https://plane.test', 'https://plane.test/.well-known/svc/capability-token'],
    ['https://plane.test/', 'https://plane.test/.well-known/svc/capability-token'],
    ['https://x.test/plane/', 'https://x.test/plane/.well-known/svc/capability-token'],
    [
      'https://plane.test/.well-known/svc/capability-token',
      'https://plane.test/.well-known/svc/capability-token',
    ],
    ['https://plane.test/?q=1#f', 'https://plane.test/.well-known/svc/capability-token'],
  ];
  for (const [base, expected] of expectations) {
    assert.equal(capabilityTokenEndpointUrl(base).href, expected);
  }
});

test('the JWK requester gets a bound token and carries the matching proof signer', async () => {
  const fixture = await endpointFixture();
  const requester = controlPlaneJwkTokenRequester({
    clientId: 'jc1',
    keyId: 'jk1',
    privateJwk: fixture.keys.jk1.privateJwk,
    issuer: ISSUER,
    controlPlaneUrl: `${ISSUER}/`,
    fetch: (request) => fixture.handle(request),
  });
  const request = { ...REQUEST, callerServiceId: 'svc-jwk' };
  const token = await requester(request);
  assert.equal(await requester(request), token);
  assert.equal(fixture.issued.length, 1);
  const jkt = (tokenClaims(token).cnf as { jkt: string }).jkt;
  assert.equal(fixture.issued[0].caller.confirmationJkt, jkt);
  const proof = await requester.proveTokenPossession({
    token,
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
  });
  await verifyCapabilityProof(proof, { token, jkt, audience: 'svc-a', abilityId: 'svc-a.echo' });
});

test('the JWK requester signs for the default issuer unless told the plane issuer', async () => {
  const fixture = await endpointFixture();
  const requester = controlPlaneJwkTokenRequester({
    clientId: 'jc1',
    keyId: 'jk1',
    privateJwk: fixture.keys.jk1.privateJwk,
    controlPlaneUrl: ISSUER,
    fetch: (request) => fixture.handle(request),
  });
  await assert.rejects(requester({ ...REQUEST, callerServiceId: 'svc-jwk' }), { status: 401 });
  const event = fixture.events.find((e) => e.event === 'svc.caller_auth.jwk_unauthorized');
  assert.equal(event?.reason, 'audience_mismatch');
});

async function tokenLiving(seconds: number): Promise<string> {
  const key = (await endpointFixture()).keys.k1;
  const iat = Math.floor(Date.now() / 1000);
  return await signCompactEs256(
    { alg: 'ES256', kid: 'k1', typ: 'svc-capability+jwt' },
    {
      iss: ISSUER,
      sub: 'svc-caller',
      aud: 'svc-a',
      scp: ['svc-a.read'],
      jti: 'j',
      iat,
      nbf: iat,
      exp: iat + seconds,
    },
    key.privateKey,
  );
}

test('the RPC requester pins its caller, caches, and accepts a string or a token response', async () => {
  const calls: Record<string, unknown>[] = [];
  const token = await tokenLiving(300);
  const binding = {
    requestCapabilityToken(request: Record<string, unknown>) {
      calls.push(request);
      return Promise.resolve(calls.length === 1 ? token : { token: `${token}2`, expiresIn: 300 });
    },
  };
  const requester = controlPlaneRpcTokenRequester({
    binding,
    callerServiceId: 'svc-caller',
    ttlSeconds: 300,
  });
  assert.equal(await requester(REQUEST), token);
  assert.equal(await requester(REQUEST), token, 'cached by the lifetime read from the token');
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0], {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    abilityId: 'svc-a.echo',
    ttlSeconds: 300,
  });
  assert.equal(await requester({ ...REQUEST, abilityId: 'svc-a.other' }), `${token}2`);
  await assert.rejects(requester({ ...REQUEST, callerServiceId: 'svc-other' }), {
    status: 403,
    reason: 'caller_mismatch',
  });
  assert.equal(calls.length, 2);
});

test('the RPC requester rebuilds received taxonomy errors and reads anything else as an unreachable plane', async () => {
  const received = Object.assign(new Error('Unknown scope'), {
    code: 'capability_auth',
    status: 403,
    retryable: true,
    reason: 'unknown_scope',
  });
  const failing = controlPlaneRpcTokenRequester({
    binding: { requestCapabilityToken: () => Promise.reject(received) },
    callerServiceId: 'svc-caller',
  });
  await assert.rejects(failing(REQUEST), (error: unknown) => {
    const info = error as Record<string, unknown>;
    return info.code === 'capability_auth' && info.status === 403 && info.retryable === false &&
      info.reason === 'unknown_scope' && (error as Error).message === 'Unknown scope';
  });
  // Anything else is the plane being unreachable: typed and transient, the original as cause.
  for (const other of [new TypeError('Network connection lost.'), undefined, 'boom', 42]) {
    const broken = controlPlaneRpcTokenRequester({
      binding: { requestCapabilityToken: () => Promise.reject(other) },
      callerServiceId: 'svc-caller',
    });
    await assert.rejects(broken(REQUEST), (error: unknown) => {
      assert.deepEqual({ ...svcErrorInfo(error) }, {
        code: 'internal',
        status: 503,
        retryable: true,
        reason: 'control_plane_unreachable',
      });
      assert.equal((error as Error).cause, other);
      return true;
    });
  }
  // An answer that throws when read, or carries a token no service would accept, is invalid.
  const answers = [
    {
      get token(): string {
        throw new Error('getter');
      },
    },
    { token: 'a'.repeat(64 * 1024), expiresIn: 300 },
  ];
  for (const answer of answers) {
    const odd = controlPlaneRpcTokenRequester({
      binding: { requestCapabilityToken: () => Promise.resolve(answer) },
      callerServiceId: 'svc-caller',
    });
    await assert.rejects(odd(REQUEST), { status: 502, reason: 'token_response_invalid' });
  }
});

test('controlPlaneUrl is refused at construction, as httpService refuses its url, before anything is sent', async () => {
  const fixture = await endpointFixture();
  let sent = 0;
  const fetchToken = () => {
    sent++;
    return Promise.resolve(new Response('{}'));
  };
  const build = {
    hmac: (controlPlaneUrl: unknown) =>
      controlPlaneHmacTokenRequester({
        clientId: 'hc1',
        clientSecret: 'x'.repeat(32),
        controlPlaneUrl: controlPlaneUrl as string,
        fetch: fetchToken,
      }),
    jwk: (controlPlaneUrl: unknown) =>
      controlPlaneJwkTokenRequester({
        clientId: 'jc1',
        keyId: 'jk1',
        privateJwk: fixture.keys.jk1.privateJwk,
        controlPlaneUrl: controlPlaneUrl as string,
        fetch: fetchToken,
      }),
  };
  const refused: [unknown, RegExp][] = [
    ['https://user:secret@plane.test/', /must not carry credentials/],
    ['https://user@plane.test/', /must not carry credentials/],
    [new URL('https://:secret@plane.test/'), /must not carry credentials/],
    ['ftp://plane.test/', /must use http: or https: \(got ftp:\)/],
    ['javascript:alert(1)', /must use http: or https:/],
    ['data:,x', /must use http: or https:/],
    ['plane.test', /must be an absolute http: or https: URL/],
    [42, /must be an absolute http: or https: URL/],
  ];
  for (const [kind, requester] of Object.entries(build)) {
    for (const [url, problem] of refused) {
      assert.throws(
        () => requester(url),
        (error: unknown) => {
          assert.ok(error instanceof SvcConfigurationError, `${kind} ${url}: ${error}`);
          assert.equal(error.reason, 'invalid_token_requester');
          assert.match(error.message, /`controlPlaneUrl`/);
          assert.match(error.message, problem, `${kind} ${url}`);
          return true;
        },
      );
    }
    assert.equal(typeof requester('http://plane.test/'), 'function', `${kind}: http accepted`);
  }
  assert.equal(sent, 0, 'nothing was sent');
});

test('requesters refuse bad options at construction', async () => {
  const fixture = await endpointFixture();
  const hmac = { clientId: 'hc1', clientSecret: 's', controlPlaneUrl: ISSUER };
  const jwk = {
    clientId: 'jc1',
    keyId: 'jk1',
    privateJwk: fixture.keys.jk1.privateJwk,
    controlPlaneUrl: ISSUER,
  };
  const attempts: (() => unknown)[] = [
    () => controlPlaneHmacTokenRequester({ ...hmac, clientSecret: '' }),
    () => controlPlaneHmacTokenRequester({ ...hmac, clientId: 'a,b' }),
    () => controlPlaneHmacTokenRequester({ ...hmac, controlPlaneUrl: 'not a url' }),
    () => controlPlaneHmacTokenRequester({ ...hmac, ttlSeconds: 0 }),
    () => controlPlaneHmacTokenRequester({ ...hmac, fetch: 'fetch' as never }),
    () => controlPlaneJwkTokenRequester({ ...jwk, keyId: '' }),
    () => controlPlaneJwkTokenRequester({ ...jwk, privateJwk: fixture.keys.jk1.publicJwk }),
    () => controlPlaneJwkTokenRequester({ ...jwk, issuer: '' }),
    () => controlPlaneRpcTokenRequester({ binding: {} as never, callerServiceId: 'svc' }),
    () =>
      controlPlaneRpcTokenRequester({
        binding: { requestCapabilityToken: () => Promise.resolve('') },
        callerServiceId: '',
      }),
  ];
  for (const attempt of attempts) assert.throws(attempt, SvcConfigurationError);
});

test('a response cannot stretch a token past its own lifetime: expiresIn is capped at exp - iat', async () => {
  const calls: unknown[] = [];
  // A token living 10 s, answered as if it lived an hour: a 10 s lifetime is due for renewal
  // after 5 s, where an hour would still be served from the cache.
  const token = await tokenLiving(10);
  const binding = {
    requestCapabilityToken(request: unknown) {
      calls.push(request);
      return Promise.resolve({ token, expiresIn: 3600 });
    },
  };
  await withMovableClocks(async (moved) => {
    const requester = controlPlaneRpcTokenRequester({ binding, callerServiceId: 'svc-caller' });
    await requester(REQUEST);
    moved.monotonicMs += 6_000;
    await requester(REQUEST);
  });
  assert.equal(calls.length, 2, 'the token was not kept for the hour the response claimed');
});

test('a token that does not answer the request is refused, never cached, never presented', async () => {
  const wrong: [string, string][] = [
    ['another audience', unsignedRequesterToken({ aud: 'svc-c' })],
    ['another caller', unsignedRequesterToken({ sub: 'svc-other' })],
    ['fewer scopes', unsignedRequesterToken({ scp: ['svc-a.write'] })],
    ['no scopes', unsignedRequesterToken({ scp: 'svc-a.read' })],
    ['not a JWS', 'an-opaque-token'],
  ];
  for (const [label, token] of wrong) {
    let fetches = 0;
    const requester = controlPlaneRpcTokenRequester({
      binding: {
        requestCapabilityToken: () => (fetches++, Promise.resolve({ token, expiresIn: 300 })),
      },
      callerServiceId: 'svc-caller',
    });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(requester(REQUEST), (error: unknown) => {
        assert.deepEqual(
          { ...svcErrorInfo(error) },
          { code: 'internal', status: 502, retryable: true, reason: 'token_response_invalid' },
          label,
        );
        return true;
      });
    }
    assert.equal(fetches, 2, `${label}: nothing cached`);
  }
  // More scopes than asked for is the plane's grant to make; the token answers the request.
  const wider = unsignedRequesterToken({ scp: ['svc-a.read', 'svc-a.write'] });
  const requester = controlPlaneRpcTokenRequester({
    binding: { requestCapabilityToken: () => Promise.resolve({ token: wider, expiresIn: 300 }) },
    callerServiceId: 'svc-caller',
  });
  assert.equal(await requester(REQUEST), wider);
});

test('one lost token fetch does not hold the later, overlapping calls of a budgeted session', async () => {
  const fixture = await endpointFixture();
  let planeRequests = 0;
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: fixture.secrets.hc1,
    controlPlaneUrl: 'https://plane.test',
    fetch: (request) => {
      // The first request reaches a replica that accepted the connection and went silent.
      if (++planeRequests > 1) return fixture.handle(request);
      return new Promise<Response>((_, reject) =>
        request.signal.addEventListener('abort', () => reject(request.signal.reason))
      );
    },
  });
  const budgetMs = 150;
  const outcomes: string[] = [];
  const calls: Promise<void>[] = [];
  // A call every 50 ms, each waiting up to 150 ms: some call always waits on a token.
  for (let i = 0; i < 12; i++) {
    const signal = AbortSignal.timeout(budgetMs);
    calls.push(
      requester({ ...REQUEST, signal }).then(
        () => void outcomes.push('ok'),
        () => void outcomes.push('gave up'),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await Promise.all(calls);
  // Before: every call joined the lost fetch while another waited on it, and none succeeded.
  assert.ok(outcomes.filter((outcome) => outcome === 'ok').length >= 6, outcomes.join());
  assert.ok(planeRequests >= 2, 'the lost fetch is left once a call gives up on it');
});

/** An RPC requester over a binding that resolves `answer`, counting the requests it gets. */
function answeringRpcRequester(answer: unknown) {
  const binding = { requests: 0 };
  const requester = controlPlaneRpcTokenRequester({
    binding: {
      requestCapabilityToken: () => (binding.requests++, Promise.resolve(answer)),
    },
    callerServiceId: 'svc-caller',
  });
  return { binding, requester };
}

test('the RPC requester reads a refusal answered as data, its fields re-validated', async () => {
  const { requester } = answeringRpcRequester({
    error: {
      code: 'capability_auth',
      status: 403,
      retryable: true,
      reason: 'grant_denied',
      message: 'svc-caller is not granted svc-a.write on svc-a',
    },
  });
  await assert.rejects(requester(REQUEST), (error: unknown) => {
    assert.deepEqual({ ...svcErrorInfo(error) }, {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'grant_denied',
    });
    assert.equal((error as Error).message, 'svc-caller is not granted svc-a.write on svc-a');
    return true;
  });
});

test('a refusal answer is never a token: not beside one, not with a success status, never cached', async () => {
  const token = await tokenLiving(300);
  const hostile: [string, unknown, Record<string, unknown>][] = [
    [
      'a refusal beside a valid token',
      { token, expiresIn: 300, error: { code: 'capability_auth', status: 403, reason: 'x' } },
      { code: 'capability_auth', status: 403, retryable: false },
    ],
    [
      'a refusal claiming status 200',
      { error: { code: 'capability_auth', status: 200, retryable: true } },
      { code: 'capability_auth', status: 401, retryable: false },
    ],
    [
      'a handler refusal claiming status 200',
      { error: { code: 'handler', status: 200, message: 'fine' } },
      { code: 'handler', status: 500, retryable: false },
    ],
    [
      'a refusal without a taxonomy code',
      { error: { status: 200, message: 'ok' } },
      { code: 'internal', status: 502, retryable: true, reason: 'token_response_invalid' },
    ],
    [
      'a null refusal',
      { error: null },
      { code: 'internal', status: 502, retryable: true, reason: 'token_response_invalid' },
    ],
    [
      'a string refusal',
      { error: 'denied' },
      { code: 'internal', status: 502, retryable: true, reason: 'token_response_invalid' },
    ],
  ];
  for (const [label, answer, expected] of hostile) {
    const { binding, requester } = answeringRpcRequester(answer);
    for (let i = 0; i < 2; i++) {
      await assert.rejects(requester(REQUEST), (error: unknown) => {
        const info = svcErrorInfo(error) as unknown as Record<string, unknown>;
        for (const [key, value] of Object.entries(expected)) {
          assert.equal(info[key], value, `${label}: ${key}`);
        }
        return true;
      });
    }
    assert.equal(binding.requests, 2, `${label}: the failure was not cached`);
  }
});

test('a refusal message is bounded, and one that is not a string gets a default', async () => {
  const refusal = (message: unknown) => ({
    error: { code: 'capability_auth', status: 403, reason: 'grant_denied', message },
  });
  const { requester: huge } = answeringRpcRequester(refusal('m'.repeat(1024 * 1024)));
  await assert.rejects(huge(REQUEST), (error: unknown) => {
    assert.equal((error as Error).message.length, 512);
    return true;
  });
  for (const message of [{ toString: () => 'object' }, 42, '']) {
    const { requester } = answeringRpcRequester(refusal(message));
    await assert.rejects(requester(REQUEST), (error: unknown) => {
      assert.equal((error as Error).message, 'Capability token request failed');
      assert.equal(svcErrorInfo(error).reason, 'grant_denied');
      return true;
    });
  }
});

test('a refusal answer whose fields throw when read is an invalid answer', async () => {
  const answers = [
    {
      get error(): unknown {
        throw new Error('getter');
      },
    },
    {
      error: {
        get code(): string {
          throw new Error('getter');
        },
      },
    },
  ];
  for (const answer of answers) {
    const { requester } = answeringRpcRequester(answer);
    await assert.rejects(requester(REQUEST), (error: unknown) => {
      assert.equal(svcErrorInfo(error).reason, 'token_response_invalid');
      assert.equal(svcErrorInfo(error).status, 502);
      return true;
    });
  }
});

test('an error a runtime stripped of its fields on the way reads as the plane unreachable', async () => {
  // What a Worker without enhanced_error_serialization receives for a thrown 403 refusal.
  const stripped = new Error('CapabilityAuthError: svc-caller is not granted svc-a.write');
  Object.assign(stripped, { remote: true });
  const requester = controlPlaneRpcTokenRequester({
    binding: { requestCapabilityToken: () => Promise.reject(stripped) },
    callerServiceId: 'svc-caller',
  });
  await assert.rejects(requester(REQUEST), (error: unknown) => {
    assert.deepEqual({ ...svcErrorInfo(error) }, {
      code: 'internal',
      status: 503,
      retryable: true,
      reason: 'control_plane_unreachable',
    });
    return true;
  });
});
