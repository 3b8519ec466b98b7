// The test signing authority of `svcplane/testing`: a service trusting its JWKS accepts its tokens
// and refuses them exactly as it refuses the plane's (missing scope 403, another audience 401,
// another key 401, expired 401), it mints only contract-valid claim sets, and it ships no key.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  generateSigningKeyEntry,
  httpBatchRpc,
  SvcConfigurationError,
  svcErrorInfo,
} from '../../mod.ts';
import {
  createTestTokenIssuer,
  DEFAULT_TEST_TOKEN_ISSUER,
  staticTokenRequester,
} from '../../src/testing/mod.ts';
import { notesFixture } from './notes-fixture.ts';

function payloadOf(token: string): Record<string, unknown> {
  const segment = token.split('.')[1].replaceAll('-', '+').replaceAll('_', '/');
  return JSON.parse(atob(segment));
}

function headerOf(token: string): Record<string, unknown> {
  const segment = token.split('.')[0].replaceAll('-', '+').replaceAll('_', '/');
  return JSON.parse(atob(segment));
}

async function refusal(call: Promise<unknown>) {
  const error = await call.then(() => assert.fail('the call was accepted'), (caught) => caught);
  return { ...svcErrorInfo(error) };
}

test('A service created with the issuer auth accepts its token over in-process HTTP-batch', async () => {
  const fx = await notesFixture();
  const token = await fx.tokens.token({ aud: 'notes', sub: 'billing', scopes: ['notes.read'] });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  assert.deepEqual(await session.whoami({}), {
    serviceId: 'billing',
    scopes: ['notes.read'],
    callerAccess: 'service',
    subject: null,
  });
});

test('A token lacking the method scope is refused 403 as the service refuses any token', async () => {
  const fx = await notesFixture();
  const token = await fx.tokens.token({ aud: 'notes', sub: 'billing', scopes: ['notes.read'] });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  const info = await refusal(session.write({ text: 'x' }));
  assert.equal(info.code, 'capability_auth');
  assert.equal(info.status, 403);
  assert.equal(info.retryable, false);
});

test('A token for another audience is refused 401 audience_mismatch', async () => {
  const fx = await notesFixture();
  const token = await fx.tokens.token({ aud: 'billing', scopes: ['notes.read'] });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  assert.deepEqual(await refusal(session.whoami({})), {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    reason: 'audience_mismatch',
  });
});

test('Each issuer has its own key: a token from another issuer instance is refused 401', async () => {
  const fx = await notesFixture();
  const stranger = await createTestTokenIssuer();
  assert.notEqual(stranger.kid, fx.tokens.kid);
  assert.notDeepEqual(stranger.jwks, fx.tokens.jwks);
  const token = await stranger.token({ aud: 'notes', scopes: ['notes.read'] });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  const info = await refusal(session.whoami({}));
  assert.equal(info.status, 401);
  assert.equal(info.code, 'capability_auth');
});

test('issuedAt in the past mints an expired token, refused 401 token_expired', async () => {
  const fx = await notesFixture();
  const token = await fx.tokens.token({
    aud: 'notes',
    scopes: ['notes.read'],
    ttlSeconds: 60,
    issuedAt: new Date(Date.now() - 3600_000),
  });
  const claims = payloadOf(token);
  assert.equal((claims.exp as number) - (claims.iat as number), 60);
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  assert.equal((await refusal(session.whoami({}))).reason, 'token_expired');
});

test('A token carries the contract claims: header, closed claim set, defaults', async () => {
  const tokens = await createTestTokenIssuer({ kid: 'fixture-key' });
  const token = await tokens.token({ aud: 'notes', scopes: ['b', 'a', 'b'] });
  assert.deepEqual(headerOf(token), {
    alg: 'ES256',
    kid: 'fixture-key',
    typ: 'svc-capability+jwt',
  });
  const claims = payloadOf(token);
  assert.equal(claims.iss, DEFAULT_TEST_TOKEN_ISSUER);
  assert.equal(claims.sub, 'test-caller');
  assert.equal(claims.aud, 'notes');
  assert.deepEqual(claims.scp, ['a', 'b']);
  assert.equal(claims.spa, 'service');
  assert.equal(claims.nbf, claims.iat);
  assert.equal((claims.exp as number) - (claims.iat as number), 120);
  assert.equal(typeof claims.jti, 'string');
  assert.notEqual(
    (await tokens.token({ aud: 'notes', scopes: ['a'] })).split('.')[1],
    token.split('.')[1],
  );
});

test('A delegated token reaches the handler as a plane-class subject', async () => {
  const fx = await notesFixture();
  const token = await fx.tokens.token({
    aud: 'notes',
    sub: 'user-7',
    act: { sub: 'billing' },
    spk: 'api_key',
    scopes: ['notes.read'],
  });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  assert.deepEqual(await session.whoami({}), {
    serviceId: 'billing',
    scopes: ['notes.read'],
    callerAccess: 'plane',
    subject: { id: 'user-7', kind: 'api_key' },
  });
});

test('The issuer refuses claim sets the contract forbids, and misspelt options', async () => {
  const tokens = await createTestTokenIssuer();
  const refusals: Promise<unknown>[] = [
    // A delegated token is always plane-class.
    tokens.token({ aud: 'notes', scopes: [], act: { sub: 'billing' }, spa: 'service' }),
    // spk and spo belong to delegated tokens only.
    tokens.token({ aud: 'notes', scopes: [], spk: 'user' }),
    tokens.token({ aud: '', scopes: [] }),
    tokens.token({ aud: 'notes', scopes: [''] }),
    tokens.token({ aud: 'notes', scopes: [], ttlSeconds: 3601 }),
    tokens.token({ aud: 'notes', scopes: [], ttlSeconds: 0 }),
    tokens.token({ aud: 'notes', scopes: [], issuedAt: new Date(Number.NaN) }),
    tokens.token({ aud: 'notes', scopes: [], ttlSecond: 30 } as never),
    createTestTokenIssuer({ kid: 'has space' }),
    createTestTokenIssuer({ issuer: '' }),
    createTestTokenIssuer({ isuer: 'x' } as never),
  ];
  for (const [index, pending] of refusals.entries()) {
    await assert.rejects(pending, SvcConfigurationError, `case ${index}`);
  }
});

test('The issuer tokenRequester signs a token per request for the session caller, target and scopes', async () => {
  const fx = await notesFixture();
  const requester = fx.tokens.tokenRequester({ ttlSeconds: 30 });
  const token = await requester({
    callerServiceId: 'billing',
    targetServiceId: 'notes',
    abilityId: 'notes.store',
    scopes: ['notes.read'],
  });
  const claims = payloadOf(token);
  assert.equal(claims.sub, 'billing');
  assert.equal(claims.aud, 'notes');
  assert.equal((claims.exp as number) - (claims.iat as number), 30);
  using session = fx.session(httpBatchRpc(fx.service.fetch), requester, [
    'notes.read',
    'notes.write',
  ]);
  assert.deepEqual(await session.write({ text: 'x' }), { written: true });
  assert.deepEqual((await session.whoami({})).scopes, ['notes.read', 'notes.write']);
  assert.throws(() => fx.tokens.tokenRequester({ aud: 'x' } as never), SvcConfigurationError);
});

test('No private key leaves a generated issuer: the JWKS holds only public members', async () => {
  const tokens = await createTestTokenIssuer();
  assert.equal(tokens.jwks.keys.length, 1);
  assert.deepEqual(Object.keys(tokens.jwks.keys[0]).sort(), [
    'alg',
    'crv',
    'kid',
    'kty',
    'use',
    'x',
    'y',
  ]);
  assert.equal(JSON.stringify(tokens).includes('"d"'), false);
  assert.ok(Object.isFrozen(tokens.jwks.keys));
  assert.deepEqual(tokens.auth, { jwks: tokens.jwks, issuer: tokens.issuer });
});

test('A supplied signing key gives every issuer built from it the same key', async () => {
  const signingKey = await generateSigningKeyEntry({ kid: 'shared-1' });
  const first = await createTestTokenIssuer({ signingKey });
  const second = await createTestTokenIssuer({ signingKey });
  assert.equal(first.kid, 'shared-1');
  assert.deepEqual(first.jwks, second.jwks);
  // A token from one is accepted by a service trusting the other.
  const fx = await notesFixture({ tokens: second });
  const token = await first.token({ aud: 'notes', sub: 'billing', scopes: ['notes.read'] });
  using session = fx.session(httpBatchRpc(fx.service.fetch), staticTokenRequester(token));
  assert.equal((await session.whoami({})).serviceId, 'billing');
  await assert.rejects(createTestTokenIssuer({ signingKey, kid: 'other' }), SvcConfigurationError);
  await assert.rejects(
    createTestTokenIssuer({ signingKey: { kid: 'bad', secret: '{}' } }),
    SvcConfigurationError,
  );
});

test('staticTokenRequester answers its token and refuses anything but a non-empty string', async () => {
  const requester = staticTokenRequester('a.b.c');
  assert.equal(
    await requester({ callerServiceId: 'x', targetServiceId: 'y', abilityId: 'y.z', scopes: [] }),
    'a.b.c',
  );
  assert.throws(() => staticTokenRequester(''), SvcConfigurationError);
  assert.throws(() => staticTokenRequester(undefined as never), SvcConfigurationError);
});
