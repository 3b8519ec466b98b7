// A service whose own configuration refuses every call (a JWKS it cannot fetch, tokens from an
// issuer it was not told about) says so at `warn` with what the operator needs to fix it: the
// JWKS URL and the status it answered, or both issuer names. The caller sees none of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import {
  abilityMethod,
  abilitySession,
  createService,
  defineAbility,
  httpBatchRpc,
  jwksFromUrl,
  type ServiceAuthOptions,
  svcErrorInfo,
  type SvcLogEvent,
} from '../../mod.ts';
import { createTestTokenIssuer, staticTokenRequester } from '../../src/testing/mod.ts';

const JWKS_URL = 'https://plane.example.test/.well-known/svc/jwks.json';

const ping = defineAbility({
  id: 'probe.ping',
  methods: { ping: abilityMethod({ input: z.object({}), output: z.object({ ok: z.boolean() }) }) },
  handler: () => ({ ping: () => ({ ok: true }) }),
});

/** Calls `probe.ping` once with a valid test token against a service configured with `auth`. */
async function callWith(auth: ServiceAuthOptions, token: string) {
  const events: SvcLogEvent[] = [];
  const service = createService({
    id: 'probe',
    title: 'Probe',
    version: '1.0.0',
    auth,
    abilities: [ping],
    logger: { log: (event) => void events.push(event) },
  });
  using session = abilitySession<{ ping(input: Record<string, never>): Promise<unknown> }>({
    abilityId: 'probe.ping',
    callerServiceId: 'billing',
    targetServiceId: 'probe',
    scopes: ['probe.read'],
    requestToken: staticTokenRequester(token),
    transport: httpBatchRpc(service.fetch),
    requestId: 'req-warn',
  });
  const error = await session.ping({}).then(() => assert.fail('accepted'), (caught) => caught);
  return { error, events, warnings: events.filter((event) => event.level === 'warn') };
}

test('a JWKS route answering 404 is logged at warn with its URL and status', async () => {
  const tokens = await createTestTokenIssuer();
  const token = await tokens.token({ aud: 'probe', sub: 'billing', scopes: ['probe.read'] });
  const { error, warnings } = await callWith({
    issuer: tokens.issuer,
    jwks: jwksFromUrl(JWKS_URL, {
      fetch: () => Promise.resolve(new Response('no such route', { status: 404 })),
    }),
  }, token);
  assert.equal(svcErrorInfo(error).reason, 'jwks_unavailable');
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.deepEqual({ ...warnings[0], error: undefined }, {
    event: 'svc.auth.jwks_unavailable',
    level: 'warn',
    requestId: 'req-warn',
    url: JWKS_URL,
    status: 404,
    error: undefined,
  });
  // The URL is the operator's: the caller's error does not carry it.
  assert.ok(!String((error as Error).message).includes('plane.example.test'));
});

test('an unreachable JWKS is logged at warn with its URL and no status', async () => {
  const tokens = await createTestTokenIssuer();
  const token = await tokens.token({ aud: 'probe', sub: 'billing', scopes: ['probe.read'] });
  const { warnings } = await callWith({
    issuer: tokens.issuer,
    jwks: jwksFromUrl(JWKS_URL, {
      fetch: () => Promise.reject(new TypeError('fetch failed: connection refused')),
    }),
  }, token);
  assert.equal(warnings.length, 1, JSON.stringify(warnings));
  assert.equal(warnings[0].event, 'svc.auth.jwks_unavailable');
  assert.equal(warnings[0].url, JWKS_URL);
  assert.equal(warnings[0].status, undefined);
});

test('tokens from another issuer are logged at warn with both issuers', async () => {
  const tokens = await createTestTokenIssuer({ issuer: 'https://plane-b.example.test' });
  const token = await tokens.token({ aud: 'probe', sub: 'billing', scopes: ['probe.read'] });
  const { error, warnings } = await callWith(
    { jwks: tokens.auth.jwks, issuer: 'https://plane-a.example.test' },
    token,
  );
  assert.deepEqual({ ...svcErrorInfo(error) }, {
    code: 'capability_auth',
    status: 401,
    retryable: false,
    reason: 'issuer_mismatch',
  });
  assert.deepEqual(warnings, [{
    event: 'svc.auth.issuer_mismatch',
    level: 'warn',
    requestId: 'req-warn',
    status: 401,
    expectedIssuer: 'https://plane-a.example.test',
    tokenIssuer: 'https://plane-b.example.test',
  }]);
});

test("a caller's own bad token is not a configuration warning", async () => {
  const tokens = await createTestTokenIssuer();
  const token = await tokens.token({
    aud: 'another-service',
    sub: 'billing',
    scopes: ['probe.read'],
  });
  const { error, warnings } = await callWith(tokens.auth, token);
  assert.equal(svcErrorInfo(error).reason, 'audience_mismatch');
  assert.deepEqual(warnings, []);
});
