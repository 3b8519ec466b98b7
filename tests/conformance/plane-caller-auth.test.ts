// Contract "Token endpoint caller authentication" r1-r9, end to end: the shipped requesters talk
// to the real plane (`fetch: plane.fetch`), which issues tokens the real services accept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CallerAuthenticator } from '../../src/plane/caller-auth.ts';
import { localService } from '../../src/plane/endpoints.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
  controlPlaneRpcTokenRequester,
} from '../../src/caller/token-requesters.ts';
import {
  assertRefusal,
  createPlaneDeployment,
  decodeJws,
  HMAC_SECRETS,
  hmacTokenRequest,
  ISS,
  JWKS_URL,
  jwkTokenRequest,
  PLANE_URL,
  RETIRED_SCOPE,
  TOKEN_URL,
  tokenBody,
} from './plane-fixture.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';

type Report = { identity: Record<string, unknown> };

/** A fetch into the deployed plane that records every request it passes on. */
function recordingFetch(target: (request: Request) => Promise<Response>) {
  const seen: { url: string; headers: Headers; body: string }[] = [];
  const fetch = async (request: Request) => {
    seen.push({
      url: request.url,
      headers: new Headers(request.headers),
      body: await request.clone().text(),
    });
    return await target(request);
  };
  return { fetch, seen };
}

test('Caller authentication r1: every admitted caller is a service-class caller', async () => {
  const robot: CallerAuthenticator = {
    scheme: 'Robot',
    challenge: 'Robot realm="fixture"',
    authenticate: (request) =>
      Promise.resolve(
        request.headers.get('Authorization') === 'Robot sesame'
          ? { clientId: 'robot', serviceId: 'svc-robot' }
          : Promise.reject(new Error('unreachable in this test')),
      ),
  };
  const fx = await createPlaneDeployment();
  const hmac = fx.hmacRequester();
  const jwk = fx.jwkRequester();
  for (
    const [label, requester, callerServiceId] of [
      ['hmac', hmac, 'svc-caller'],
      ['jwk', jwk, 'svc-jwk'],
    ] as const
  ) {
    using session = fx.session('svc-a.internal', {
      requester: requester as never,
      callerServiceId,
      scopes: ['svc-a.internal'],
    });
    const { identity } = await session.whoami({}) as Report;
    assert.equal(identity.callerAccess, 'service', label);
    assert.equal(identity.serviceId, callerServiceId, label);
  }
  const custom = await createPlaneDeployment({ authenticateCaller: [robot] });
  const response = await custom.send(
    new Request(TOKEN_URL, {
      method: 'POST',
      headers: { Authorization: 'Robot sesame' },
      body: JSON.stringify(tokenBody({ callerServiceId: 'svc-robot' })),
    }),
  );
  assert.equal(response.status, 200);
  assert.equal(decodeJws(response.body.token).claims.spa, 'service');
  assert.equal(decodeJws(response.body.token).claims.sub, 'svc-robot');
});

test('Caller authentication r1: without authenticateCaller every token request is refused', async () => {
  const fx = await createPlaneDeployment({ authenticateCaller: false });
  const response = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(response.status, 401);
  assert.equal(response.body.token, undefined);
  const [event] = fx.eventsNamed('svc.caller_auth.not_configured');
  assert.equal(event.level, 'warn');
  assert.equal(event.requestId, response.headers.get('X-Request-Id'));
});

test('Caller authentication r2: the HMAC requester end to end, with its token cache', async () => {
  const fx = await createPlaneDeployment();
  const recorder = recordingFetch((request) => fx.plane.fetch(request));
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    controlPlaneUrl: PLANE_URL,
    clientSecret: HMAC_SECRETS.hc1,
    fetch: recorder.fetch,
  });
  for (let i = 0; i < 2; i++) {
    using session = fx.session('svc-a.echo', { requester });
    const { identity } = await session.whoami({}) as Report;
    assert.equal(identity.serviceId, 'svc-caller');
  }
  assert.equal(recorder.seen.length, 1, 'the second session reused the cached token');
});

test('Caller authentication r2: the JWK requester end to end, bound token and proof', async () => {
  const fx = await createPlaneDeployment();
  const requester = controlPlaneJwkTokenRequester({
    clientId: 'jc1',
    controlPlaneUrl: PLANE_URL,
    keyId: 'jk1',
    privateJwk: fx.keys.K1.privateJwk,
    issuer: ISS,
    fetch: (request) => fx.plane.fetch(request),
  });
  using session = fx.session('svc-a.echo', {
    requester: requester as never,
    callerServiceId: 'svc-jwk',
  });
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.serviceId, 'svc-jwk');
  assert.equal(typeof (identity.confirmation as { jkt?: unknown })?.jkt, 'string');
});

test('Caller authentication r2: the RPC requester, its caller pinned by the binding', async () => {
  const fx = await createPlaneDeployment();
  const asked: Record<string, unknown>[] = [];
  // What a plane-side binding entrypoint does: mint for its own configured caller only.
  const binding = {
    async requestCapabilityToken(request: Record<string, unknown>) {
      asked.push(request);
      const issued = await fx.plane.issueCapabilityTokenForCaller({
        caller: { clientId: 'binding:svc-caller', serviceId: 'svc-caller' },
        targetServiceId: request.targetServiceId as string,
        scopes: request.scopes as string[],
        ...(request.abilityId !== undefined ? { abilityId: request.abilityId as string } : {}),
      });
      return { token: issued.token, expiresIn: 120 };
    },
  };
  const requester = controlPlaneRpcTokenRequester({ binding, callerServiceId: 'svc-caller' });
  using session = fx.session('svc-a.echo', { requester });
  const { identity } = await session.whoami({}) as Report;
  assert.equal(identity.serviceId, 'svc-caller');
  assert.equal(identity.callerAccess, 'service');
  await assertRefusal(
    requester({
      callerServiceId: 'svc-other',
      targetServiceId: 'svc-a',
      abilityId: 'svc-a.echo',
      scopes: ['svc-a.read'],
    }),
    { status: 403, reason: 'caller_mismatch' },
  );
  assert.equal(asked.length, 1, 'the mismatching request never reached the binding');
});

test('Caller authentication r3: scheme names are case-insensitive', async () => {
  const fx = await createPlaneDeployment();
  for (const scheme of ['svc-hmac-sha256', 'SVC-HMAC-SHA256', 'sVc-HmAc-ShA256']) {
    const request = await hmacTokenRequest(tokenBody());
    const value = request.headers.get('Authorization')!.split(' ')[1];
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), {
        requestId: request.headers.get('X-Request-Id')!,
        timestampSeconds: Number(request.headers.get('X-Svc-Timestamp')),
        headers: { Authorization: `${scheme} ${value}` },
      }),
    );
    assert.equal(response.status, 200, scheme);
  }
  for (const scheme of ['svc-jwk', 'SVC-JWK']) {
    const response = await fx.send(
      await jwkTokenRequest(tokenBody({ callerServiceId: 'svc-jwk' }), { scheme }),
    );
    assert.equal(response.status, 200, scheme);
  }
});

test('Caller authentication r3: exactly one scheme and one value; 401 carries the challenge', async () => {
  const fx = await createPlaneDeployment();
  const signed = await hmacTokenRequest(tokenBody());
  const value = signed.headers.get('Authorization')!.split(' ')[1];
  const malformed = [
    'Svc-HMAC-SHA256',
    `Svc-HMAC-SHA256 ${value} extra`,
    `Svc-HMAC-SHA256 ${value}, Svc-HMAC-SHA256 ${value}`,
    `Bearer ${value}`,
    `Svc-HMAC-SHA256${value}`,
    `Svc-JWK ${value}`,
  ];
  for (const authorization of malformed) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), {
        requestId: signed.headers.get('X-Request-Id')!,
        timestampSeconds: Number(signed.headers.get('X-Svc-Timestamp')),
        headers: { Authorization: authorization },
      }),
    );
    assert.equal(response.status, 401, authorization);
    assert.match(response.headers.get('WWW-Authenticate') ?? '', /Svc-HMAC-SHA256/, authorization);
  }
  const jwkAlone = await fx.send(
    await jwkTokenRequest(tokenBody(), { authorization: 'Svc-JWK' }),
  );
  assert.equal(jwkAlone.status, 401);
  assert.match(jwkAlone.headers.get('WWW-Authenticate') ?? '', /Svc-JWK/);
});

test('Caller authentication r4: the signature covers method, path, body, client and request id', async () => {
  const fx = await createPlaneDeployment();
  const body = tokenBody();
  const tampered: [string, Parameters<typeof hmacTokenRequest>[1]][] = [
    ['body', { send: { body: JSON.stringify(tokenBody({ scopes: ['svc-a.write'] })) } }],
    ['target', { send: { body: JSON.stringify(tokenBody({ targetServiceId: 'svc-c' })) } }],
    ['ttl', { send: { body: JSON.stringify({ ...body, ttlSeconds: 3600 }) } }],
    ['path', { send: { url: `${TOKEN_URL}?x=1` } }],
    ['method', { send: { method: 'PUT' } }],
    ['client', { headers: { 'X-Svc-Client-Id': 'hc2' } }],
    ['request id', { headers: { 'X-Request-Id': 'another-request-id' } }],
  ];
  for (const [label, options] of tampered) {
    const response = await fx.send(await hmacTokenRequest(body, options));
    // Another method never reaches the signature check: the route answers it 405.
    assert.equal(response.status, label === 'method' ? 405 : 401, label);
    assert.equal(response.body.token, undefined, label);
  }
  const jwkBody = tokenBody({ callerServiceId: 'svc-jwk' });
  const jwkTampered: Parameters<typeof jwkTokenRequest>[1][] = [
    { send: { body: JSON.stringify({ ...jwkBody, scopes: ['svc-a.write'] }) } },
    { send: { url: `${TOKEN_URL}?x=1` } },
    { send: { requestId: 'another-request-id' } },
    { send: { requestId: null } },
  ];
  for (const options of jwkTampered) {
    const response = await fx.send(await jwkTokenRequest(jwkBody, options));
    assert.equal(response.status, 401, JSON.stringify(options));
  }
});

test('Caller authentication r5: the requesters send the documented headers and encodings', async () => {
  const fx = await createPlaneDeployment();
  const hmac = recordingFetch((request) => fx.plane.fetch(request));
  await controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    controlPlaneUrl: PLANE_URL,
    clientSecret: HMAC_SECRETS.hc1,
    fetch: hmac.fetch,
  })({
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  const [sent] = hmac.seen;
  assert.equal(sent.url, TOKEN_URL);
  assert.match(sent.headers.get('Authorization')!, /^Svc-HMAC-SHA256 [A-Za-z0-9_-]{43}$/);
  assert.equal(sent.headers.get('X-Svc-Client-Id'), 'hc1');
  const timestamp = Number(sent.headers.get('X-Svc-Timestamp'));
  assert.ok(Math.abs(timestamp - Date.now() / 1000) < 5);
  assert.ok((sent.headers.get('X-Request-Id') ?? '').length > 0);
  assert.deepEqual(JSON.parse(sent.body), {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    abilityId: 'svc-a.echo',
  });
  const jwk = recordingFetch((request) => fx.plane.fetch(request));
  await controlPlaneJwkTokenRequester({
    clientId: 'jc1',
    controlPlaneUrl: PLANE_URL,
    keyId: 'jk1',
    privateJwk: fx.keys.K1.privateJwk,
    issuer: ISS,
    fetch: jwk.fetch,
  })({
    callerServiceId: 'svc-jwk',
    targetServiceId: 'svc-a',
    abilityId: 'svc-a.echo',
    scopes: ['svc-a.read'],
  });
  const [asserted] = jwk.seen;
  const [scheme, assertion] = asserted.headers.get('Authorization')!.split(' ');
  assert.equal(scheme, 'Svc-JWK');
  const { header, claims } = decodeJws(assertion);
  assert.deepEqual(header, { alg: 'ES256', kid: 'jk1', typ: 'svc-client+jwt' });
  assert.deepEqual(Object.keys(claims).sort(), [
    'aud',
    'bh',
    'exp',
    'htm',
    'htu',
    'iat',
    'iss',
    'jti',
    'rid',
    'sub',
  ]);
  assert.equal(claims.iss, 'jc1');
  assert.equal(claims.sub, 'jc1');
  assert.equal(claims.aud, ISS);
  assert.equal(claims.htm, 'POST');
  assert.equal(claims.htu, new URL(TOKEN_URL).pathname);
  assert.equal(claims.rid, asserted.headers.get('X-Request-Id'));
  assert.ok((claims.exp as number) - (claims.iat as number) <= 300);
});

test('Caller authentication r6: HMAC replay is bounded by the timestamp window only', async () => {
  const fx = await createPlaneDeployment();
  const now = Math.floor(Date.now() / 1000);
  const replay = { requestId: 'replayed-request', timestampSeconds: now };
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody(), replay))).status, 200);
  assert.equal((await fx.send(await hmacTokenRequest(tokenBody(), replay))).status, 200);
  for (const offset of [-75, 75, -3600]) {
    const response = await fx.send(
      await hmacTokenRequest(tokenBody(), { timestampSeconds: now + offset }),
    );
    assert.equal(response.status, 401, `offset ${offset}`);
  }
  const inside = await fx.send(await hmacTokenRequest(tokenBody(), { timestampSeconds: now - 45 }));
  assert.equal(inside.status, 200);
  const narrow = await createPlaneDeployment({ hmac: { maxSkewSeconds: 10 } });
  const outside = await narrow.send(
    await hmacTokenRequest(tokenBody(), { timestampSeconds: now - 20 }),
  );
  assert.equal(outside.status, 401);
  assert.equal(
    narrow.eventsNamed('svc.caller_auth.hmac_unauthorized')[0].reason,
    'timestamp_out_of_window',
  );
});

test('Caller authentication r6: JWK replay is bounded by the assertion lifetime plus skew', async () => {
  const fx = await createPlaneDeployment();
  const body = tokenBody({ callerServiceId: 'svc-jwk' });
  const now = Math.floor(Date.now() / 1000);
  const fixed = { requestId: 'replayed-jwk', claims: { iat: now, exp: now + 60, jti: 'one' } };
  assert.equal((await fx.send(await jwkTokenRequest(body, fixed))).status, 200);
  assert.equal((await fx.send(await jwkTokenRequest(body, fixed))).status, 200);
  const expired = await fx.send(
    await jwkTokenRequest(body, { claims: { iat: now - 400, exp: now - 100 } }),
  );
  assert.equal(expired.status, 401);
  const narrow = await createPlaneDeployment({ jwk: { maxAssertionTtlSeconds: 60 } });
  const long = await narrow.send(
    await jwkTokenRequest(body, { claims: { iat: now, exp: now + 120 } }),
  );
  assert.equal(long.status, 401);
  assert.equal(
    narrow.eventsNamed('svc.caller_auth.jwk_unauthorized')[0].reason,
    'assertion_lifetime_too_long',
  );
});

test('Caller authentication r7: unknown target, scope or grant is refused', async () => {
  const fx = await createPlaneDeployment({ countSigningKeyLookups: true });
  const cases: [Record<string, unknown>, 'hc1' | 'hc2', string][] = [
    [tokenBody({ targetServiceId: 'svc-zz' }), 'hc1', 'unknown_target'],
    [tokenBody({ scopes: ['svc-a.nope'] }), 'hc1', 'unknown_scope'],
    [tokenBody({ scopes: ['*'] }), 'hc1', 'unknown_scope'],
    [tokenBody({ scopes: ['svc-a.*'] }), 'hc1', 'unknown_scope'],
    [tokenBody({ callerServiceId: 'svc-other' }), 'hc2', 'grant_denied'],
  ];
  for (const [body, clientId, reason] of cases) {
    const response = await fx.send(await hmacTokenRequest(body, { clientId }));
    assert.equal(response.status, 403, reason);
    assert.equal(response.body.reason, reason);
    assert.equal(response.body.token, undefined);
  }
  assert.equal(fx.counters.signingKeyLookups, 0, 'no refused request reached the signer');
});

test('Caller authentication r7: refusals are scoped to the affected target', async () => {
  const fx = await createPlaneDeployment();
  fx.stop('svc-d');
  const unreachable = await fx.send(
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-d', scopes: ['svc-d.read'] })),
  );
  assert.equal(unreachable.status, 500);
  assert.equal(unreachable.body.reason, 'target_unreachable');
  const retired = await fx.send(
    await hmacTokenRequest(tokenBody({ targetServiceId: 'svc-c', scopes: [RETIRED_SCOPE] })),
  );
  assert.equal(retired.status, 403);
  assert.equal(retired.body.reason, 'unknown_scope');
  assert.match(retired.body.detail, /svc-c/);
  for (
    const body of [tokenBody(), tokenBody({ targetServiceId: 'svc-c', scopes: ['svc-c.read'] })]
  ) {
    assert.equal((await fx.send(await hmacTokenRequest(body))).status, 200);
  }
});

test('Caller authentication r7: a target whose discovery failed gets its unknown-target error', async () => {
  // Reachable, but what it publishes is no discovery document the registry accepts.
  const answers = ['{"id": "svc-broken",', '[]', JSON.stringify({ id: 'svc-broken' })];
  let answer = answers[0];
  const broken = localService({
    id: 'svc-broken',
    grants: [{ caller: 'svc-caller', scopes: ['svc-broken.read'] }],
    service: fetchOnlyService(() =>
      Promise.resolve(new Response(answer, { headers: { 'Content-Type': 'application/json' } }))
    ),
  });
  const fx = await createPlaneDeployment({ extraServices: [broken] });
  for (answer of answers) {
    const refused = await fx.send(
      await hmacTokenRequest(
        tokenBody({ targetServiceId: 'svc-broken', scopes: ['svc-broken.read'] }),
      ),
    );
    assert.equal(refused.status, 403, answer);
    assert.equal(refused.body.code, 'capability_auth');
    assert.equal(refused.body.reason, 'unknown_target');
    assert.match(refused.body.detail, /svc-broken/);
    assert.equal(refused.body.token, undefined);
    assert.equal((await fx.send(await hmacTokenRequest(tokenBody()))).status, 200, 'svc-a works');
  }
});

test('Caller authentication r8: tokens and credentials stay out of URLs, cookies and logs', async () => {
  const fx = await createPlaneDeployment();
  const hmac = recordingFetch((request) => fx.plane.fetch(request));
  const requester = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    controlPlaneUrl: `${PLANE_URL}/?debug=1`,
    clientSecret: HMAC_SECRETS.hc1,
    fetch: hmac.fetch,
  });
  using session = fx.session('svc-a.echo', { requester });
  await session.whoami({});
  using jwkSession = fx.session('svc-a.echo', {
    requester: fx.jwkRequester() as never,
    callerServiceId: 'svc-jwk',
  });
  await jwkSession.whoami({});
  const refused = await hmacTokenRequest(tokenBody(), { secret: 'wrong-secret' });
  const refusedSignature = refused.headers.get('Authorization')!.split(' ')[1];
  await fx.send(refused);
  const refusedJwk = await jwkTokenRequest(tokenBody(), {
    key: fx.keys.attacker,
    header: { kid: 'jk1' },
  });
  const refusedAssertion = refusedJwk.headers.get('Authorization')!.split(' ')[1];
  await fx.send(refusedJwk);
  assert.equal(new URL(hmac.seen[0].url).search, '', 'nothing rides in the token request URL');
  const logged = JSON.stringify(fx.events);
  const secrets = [
    HMAC_SECRETS.hc1,
    HMAC_SECRETS.hc2,
    refusedSignature,
    refusedAssertion,
    ...fx.tokensAt('svc-a'),
    hmac.seen[0].headers.get('Authorization')!.split(' ')[1],
  ];
  for (const secret of secrets) assert.equal(logged.includes(secret), false);
  for (const record of fx.requests) {
    for (const token of fx.tokensAt('svc-a')) assert.equal(record.url.includes(token), false);
    assert.equal(new Headers([...record.headers]).has('Cookie'), false, record.url);
  }
  assert.equal(hmac.seen[0].headers.has('Cookie'), false, 'no cookie on the token request');
  const issued = await fx.send(await hmacTokenRequest(tokenBody()));
  assert.equal(issued.status, 200);
  assert.equal(issued.headers.has('Set-Cookie'), false, 'no cookie on the token response');
  assert.ok(fx.eventsNamed('svc.caller_auth.hmac_unauthorized').length > 0);
  assert.ok(fx.eventsNamed('svc.caller_auth.jwk_unauthorized').length > 0);
});

test('Caller authentication r9: the signing secret never leaves the plane', async () => {
  const fx = await createPlaneDeployment();
  const privateScalars = [fx.keys.k1.privateJwk.d!, fx.keys.k2.privateJwk.d!];
  const jwks = await (await fx.plane.fetch(new Request(JWKS_URL))).text();
  const token = await (await fx.plane.fetch(await hmacTokenRequest(tokenBody()))).text();
  using session = fx.plane.abilitySession({
    abilityId: 'svc-a.echo',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
  });
  await session.whoami({});
  const seenByServices = fx.requests.map((record) =>
    `${record.url} ${JSON.stringify([...record.headers])} ${record.tokens.join(' ')}`
  ).join('\n');
  for (const scalar of privateScalars) {
    for (
      const [label, text] of [
        ['jwks', jwks],
        ['token response', token],
        ['services', seenByServices],
        ['events', JSON.stringify(fx.events)],
      ]
    ) {
      assert.equal(text.includes(scalar), false, label);
    }
  }
});
