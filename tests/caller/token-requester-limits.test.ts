/**
 * Limits of the shipped token requesters and their cache: the size of a token response, the
 * lifetime read from the token when the response gives none, eviction once
 * `MAX_CACHED_CAPABILITY_TOKENS` tokens are cached, local refusal of a malformed per-request
 * TTL, and what a failed renewal does while the cached token is still valid.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SvcConfigurationError } from '../../src/core/errors.ts';
import { MAX_CACHED_CAPABILITY_TOKENS } from '../../src/caller/token-request-cache.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
  controlPlaneRpcTokenRequester,
  MAX_TOKEN_RESPONSE_BYTES,
} from '../../src/caller/token-requesters.ts';
import { unsignedRequesterToken } from '../support/forge.ts';
import { endpointFixture, ISSUER } from '../support/token-endpoint-fixture.ts';
import { withMovableClocks } from '../support/wall-clock.ts';

const REQUEST = {
  callerServiceId: 'svc-caller',
  targetServiceId: 'svc-a',
  abilityId: 'svc-a.echo',
  scopes: ['svc-a.read'],
};

const unverifiedToken = unsignedRequesterToken;

/** An HMAC requester whose plane is `answer`, counting the requests it sends. */
function httpRequester(answer: (request: Request) => Response | Promise<Response>) {
  const plane = { requests: 0 };
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    clientSecret: 'hc1-secret',
    controlPlaneUrl: ISSUER,
    fetch: (request) => {
      plane.requests++;
      return Promise.resolve(answer(request));
    },
  });
  return { plane, requester };
}

/** A body that never ends, repeating `chunk`, recording what was pulled and whether cancelled. */
function endlessBody(chunk: Uint8Array, source: { pulled: number; cancelled: boolean }) {
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      source.pulled += chunk.byteLength;
      controller.enqueue(chunk.slice());
    },
    cancel() {
      source.cancelled = true;
    },
  });
}

/** `text` padded with trailing JSON whitespace to exactly `bytes` UTF-8 bytes. */
function paddedTo(text: string, bytes: number): string {
  const padded = text + ' '.repeat(bytes - new TextEncoder().encode(text).length);
  assert.equal(new TextEncoder().encode(padded).length, bytes);
  return padded;
}

test('a token response one byte over MAX_TOKEN_RESPONSE_BYTES is refused, nothing cached; the limit itself is read', async () => {
  const token = unverifiedToken({ iat: 1000, exp: 4600 });
  const body = JSON.stringify({ token, expiresIn: 3600 });
  const sizes = [MAX_TOKEN_RESPONSE_BYTES + 1, MAX_TOKEN_RESPONSE_BYTES];
  const { plane, requester } = httpRequester(() =>
    new Response(paddedTo(body, sizes[plane.requests - 1] ?? body.length), { status: 200 })
  );
  await assert.rejects(requester(REQUEST), (error: unknown) => {
    const fields = error as Record<string, unknown>;
    assert.equal(fields.name, 'CapabilityTokenRequestError');
    assert.equal(fields.code, 'internal');
    assert.equal(fields.status, 502);
    assert.equal(fields.retryable, true);
    assert.equal(fields.reason, 'token_response_invalid');
    assert.match(String(fields.message), new RegExp(`larger than ${MAX_TOKEN_RESPONSE_BYTES}`));
    assert.match(String(fields.requestId), /^[0-9a-f-]{36}$/);
    return true;
  });
  assert.equal(await requester(REQUEST), token, 'the refusal was not cached: fetched again');
  assert.equal(await requester(REQUEST), token);
  assert.equal(plane.requests, 2, 'the accepted token is cached');
});

test('an endless token response is read only up to the limit, then released', async () => {
  const chunk = new Uint8Array(16 * 1024).fill(0x20);
  const source = { pulled: 0, cancelled: false };
  const { requester } = httpRequester(() =>
    new Response(
      endlessBody(chunk, source),
      { status: 200 },
    )
  );
  await assert.rejects(requester(REQUEST), { reason: 'token_response_invalid' });
  assert.equal(source.cancelled, true, 'the body was cancelled');
  assert.ok(
    source.pulled <= MAX_TOKEN_RESPONSE_BYTES + 4 * chunk.byteLength,
    `read ${source.pulled} bytes`,
  );
});

test('a token response declaring a Content-Length over the limit is refused unread', async () => {
  const chunk = new Uint8Array(16 * 1024).fill(0x20);
  const source = { pulled: 0, cancelled: false };
  let declared: string | null = null;
  const { requester } = httpRequester(() => {
    const response = new Response(
      endlessBody(chunk, source),
      { status: 200, headers: { 'content-length': String(MAX_TOKEN_RESPONSE_BYTES + 1) } },
    );
    declared = response.headers.get('content-length');
    return response;
  });
  await assert.rejects(requester(REQUEST), {
    reason: 'token_response_invalid',
    message: new RegExp(`larger than ${MAX_TOKEN_RESPONSE_BYTES}`),
  });
  assert.equal(source.cancelled, true);
  if (declared !== null) {
    assert.ok(source.pulled <= 2 * chunk.byteLength, `read ${source.pulled} bytes`);
  }
});

test('an oversized error answer keeps its HTTP status and is never taken for a token', async () => {
  const token = unverifiedToken({ iat: 1000, exp: 4600 });
  const { requester } = httpRequester(() =>
    new Response(paddedTo(JSON.stringify({ token }), MAX_TOKEN_RESPONSE_BYTES + 10), {
      status: 503,
    })
  );
  await assert.rejects(requester(REQUEST), { code: 'internal', status: 503, retryable: true });
});

test("without expiresIn, the token's own exp - iat is its lifetime, counted from receipt", async () => {
  const answers = new Map<string, unknown>([
    // Both claims long past: the lifetime is relative, so the caller's clock does not matter.
    ['svc-a.hour', { token: unverifiedToken({ iat: 1_000_000, exp: 1_003_600 }) }],
    ['svc-a.bare', unverifiedToken({ iat: 2_000_000, exp: 2_003_600 })],
    ['svc-a.text', { token: unverifiedToken({ iat: 5, exp: 3605 }), expiresIn: '20' }],
    ['svc-a.negative', { token: unverifiedToken({ iat: 5, exp: 3605 }), expiresIn: -1 }],
    // A 20 s lifetime: reused for half of it, then renewed.
    ['svc-a.short', { token: unverifiedToken({ iat: 1_000_000, exp: 1_000_020 }) }],
    // No usable claims: never cached.
    ['svc-a.noexp', { token: unverifiedToken({ iat: 1_000_000 }) }],
    // expiresIn, when valid, wins over the claims.
    ['svc-a.explicit', { token: unverifiedToken({ iat: 5, exp: 3605 }), expiresIn: 20 }],
  ]);
  await withMovableClocks(async (moved) => {
    const fetched = new Map<string, number>();
    const { requester } = httpRequester(async (request) => {
      const { abilityId } = await request.json() as { abilityId: string };
      fetched.set(abilityId, (fetched.get(abilityId) ?? 0) + 1);
      return Response.json(answers.get(abilityId));
    });
    for (const abilityId of answers.keys()) {
      const first = await requester({ ...REQUEST, abilityId });
      const answer = answers.get(abilityId);
      assert.equal(
        first,
        typeof answer === 'string' ? answer : (answer as { token: string }).token,
      );
    }
    // Past half of 20 s, well inside an hour.
    moved.monotonicMs += 11_000;
    for (const abilityId of answers.keys()) await requester({ ...REQUEST, abilityId });
    assert.deepEqual(Object.fromEntries(fetched), {
      'svc-a.hour': 1,
      'svc-a.bare': 1,
      'svc-a.text': 1,
      'svc-a.negative': 1,
      'svc-a.short': 2,
      'svc-a.noexp': 2,
      'svc-a.explicit': 2,
    });
  });
});

test('at MAX_CACHED_CAPABILITY_TOKENS the least recently used token is evicted and fetched again', async () => {
  const issued = new Map<string, number>();
  const requester = controlPlaneRpcTokenRequester({
    binding: {
      requestCapabilityToken({ abilityId }) {
        const count = (issued.get(abilityId!) ?? 0) + 1;
        issued.set(abilityId!, count);
        return Promise.resolve({
          token: unverifiedToken({ jti: `${abilityId}#${count}` }),
          expiresIn: 3600,
        });
      },
    },
    callerServiceId: 'svc-caller',
  });
  const ability = (index: number) => `svc-a.m${index}`;
  const request = (index: number) => requester({ ...REQUEST, abilityId: ability(index) });
  for (let index = 0; index < MAX_CACHED_CAPABILITY_TOKENS; index++) await request(index);
  assert.equal(issued.size, MAX_CACHED_CAPABILITY_TOKENS);

  // m0 is the oldest entry but was just used; m1 is now the least recently used.
  assert.equal(await request(0), unverifiedToken({ jti: `${ability(0)}#1` }));
  assert.equal(
    await request(MAX_CACHED_CAPABILITY_TOKENS),
    unverifiedToken({ jti: `${ability(1024)}#1` }),
  );
  assert.equal(
    await request(0),
    unverifiedToken({ jti: `${ability(0)}#1` }),
    'recently used: kept',
  );
  assert.equal(issued.get(ability(0)), 1);
  assert.equal(await request(2), unverifiedToken({ jti: `${ability(2)}#1` }), 'still cached');
  assert.equal(
    await request(1),
    unverifiedToken({ jti: `${ability(1)}#2` }),
    'evicted: fetched again',
  );
  assert.equal(await request(1), unverifiedToken({ jti: `${ability(1)}#2` }), 'and cached again');
  // Re-adding m1 evicted the then least recently used entry, m3.
  assert.equal(await request(3), unverifiedToken({ jti: `${ability(3)}#2` }));
  let total = 0;
  for (const count of issued.values()) total += count;
  assert.equal(total, MAX_CACHED_CAPABILITY_TOKENS + 3);
});

test('a malformed per-request ttlSeconds is refused locally before anything is sent', async () => {
  const fixture = await endpointFixture();
  const sent = { http: 0, binding: 0 };
  const countingFetch = (request: Request) => {
    sent.http++;
    return fixture.handle(request);
  };
  const requesters = {
    hmac: controlPlaneHmacTokenRequester({
      clientId: 'hc1',
      clientSecret: fixture.secrets.hc1,
      controlPlaneUrl: ISSUER,
      fetch: countingFetch,
      ttlSeconds: 300,
    }),
    jwk: controlPlaneJwkTokenRequester({
      clientId: 'jc1',
      keyId: 'jk1',
      privateJwk: fixture.keys.jk1.privateJwk,
      issuer: ISSUER,
      controlPlaneUrl: ISSUER,
      fetch: countingFetch,
    }),
    rpc: controlPlaneRpcTokenRequester({
      binding: {
        requestCapabilityToken: () => {
          sent.binding++;
          return Promise.resolve({ token: unverifiedToken({}), expiresIn: 300 });
        },
      },
      callerServiceId: 'svc-caller',
    }),
  };
  const invalid = [0, -1, 1.5, '60', Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, null];
  for (const [name, requester] of Object.entries(requesters)) {
    const callerServiceId = name === 'jwk' ? 'svc-jwk' : 'svc-caller';
    for (const ttlSeconds of invalid) {
      const label = `${name} ttlSeconds ${String(ttlSeconds)}`;
      await assert.rejects(
        requester({ ...REQUEST, callerServiceId, ttlSeconds } as typeof REQUEST),
        (error: unknown) => {
          assert.ok(error instanceof SvcConfigurationError, `${label}: ${String(error)}`);
          assert.equal(error.reason, 'invalid_token_request', label);
          assert.match(error.message, /ttlSeconds/, label);
          return true;
        },
      );
    }
  }
  assert.deepEqual(sent, { http: 0, binding: 0 });

  const valid = { ...REQUEST, ttlSeconds: 60 } as typeof REQUEST;
  await requesters.hmac(valid);
  assert.equal(fixture.issued.at(-1)?.request.ttlSeconds, 60, 'overrides the requester option');
  await requesters.jwk({ ...valid, callerServiceId: 'svc-jwk' });
  await requesters.rpc(valid);
  assert.deepEqual(sent, { http: 2, binding: 1 });
});

test('a renewal that fails while the cached token is still valid fails the request; the next success replaces the token', async () => {
  // A 20 s token is due for renewal once half of it has passed, yet still valid for 10 s more:
  // every request from then on renews while the cached one is still usable.
  type Mode = 'ok' | 'down' | 'refusing';
  let mode: Mode = 'ok';
  await withMovableClocks(async (moved) => {
    const { plane, requester } = httpRequester(() => {
      if (mode === 'down') throw new TypeError('connection refused');
      if (mode === 'refusing') {
        return Response.json(
          { code: 'capability_auth', status: 403, retryable: false, reason: 'unknown_grant' },
          { status: 403 },
        );
      }
      return Response.json({ token: unverifiedToken({}), expiresIn: 20 });
    });
    const first = await requester(REQUEST);
    moved.monotonicMs += 11_000;

    mode = 'down';
    await assert.rejects(requester(REQUEST), {
      code: 'internal',
      status: 503,
      retryable: true,
      reason: 'control_plane_unreachable',
    });
    mode = 'refusing';
    await assert.rejects(requester(REQUEST), {
      code: 'capability_auth',
      status: 403,
      retryable: false,
      reason: 'unknown_grant',
    });
    assert.equal(plane.requests, 3, 'each request tried the renewal again');

    mode = 'ok';
    const renewed = await requester(REQUEST);
    assert.notEqual(renewed, first, 'a fresh token, not the one cached before the failures');
    assert.equal(plane.requests, 4);
  });
});

test('a redirect from the token endpoint is never followed and gives no token', async () => {
  const seen: Request[] = [];
  const { plane, requester } = httpRequester((request) => {
    seen.push(request);
    return new Response(null, { status: 307, headers: { Location: 'https://elsewhere.test/' } });
  });
  await assert.rejects(requester(REQUEST), /HTTP 307/);
  assert.equal(plane.requests, 1, 'the signed request went to the configured plane only');
  assert.equal(seen[0].redirect, 'manual');
});
