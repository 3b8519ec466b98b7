// Design principle "fail closed, say why; nothing silently dropped": every control-plane reader
// of an options object refuses a key it does not know, at construction, naming it; every key the
// contract documents is still accepted, and a contract-named option that is not built yet still
// reaches its own `not_built_yet` refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { createControlPlane, JWKS_PATH } from '../../src/plane/control-plane.ts';
import { cloudflareServiceBinding, httpService, localService } from '../../src/plane/endpoints.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { memoryRegistryCache } from '../../src/plane/registry-cache.ts';
import { generateSigningKeyEntry } from '../../src/plane/signing-keys.ts';
import { capabilityTokenEntrypoint } from '../../src/plane/token-entrypoint.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { staticJwks } from '../../src/service/jwks-sources.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { createService } from '../../src/service/service.ts';
import { testKeys } from '../support/keys.ts';
import { refusedNaming, rejectedNaming } from '../support/configuration-refusals.ts';

const whoami = defineAbility({
  id: 'notes.store',
  methods: {
    whoami: abilityMethod({
      input: z.object({}),
      output: z.object({
        serviceId: z.string(),
        subject: z.object({ id: z.string(), orgId: z.string().optional() }).optional(),
      }),
      scopes: ['notes.read'],
    }),
  },
  handler: ({ identity }) => ({
    whoami: () => ({
      serviceId: identity.serviceId,
      ...(identity.subject !== undefined
        ? {
          subject: {
            id: identity.subject.id,
            ...(identity.subject.orgId !== undefined ? { orgId: identity.subject.orgId } : {}),
          },
        }
        : {}),
    }),
  }),
});

/** A plane and one in-process `notes` service granting `notes.read` to the plane and `billing`. */
async function deployment() {
  const { k1 } = await testKeys();
  const grants = [
    { caller: 'plane', scopes: ['notes.read'] },
    { caller: 'billing', scopes: ['notes.read'] },
  ];
  // The service verifies with the plane's keys, so it is built after the plane.
  const built: { service?: ReturnType<typeof createService> } = {};
  const plane = createControlPlane({
    id: 'plane',
    signingKeys: [k1.entry],
    services: () => [localService({ id: 'notes', service: built.service!, grants })],
    log: false,
  });
  built.service = createService({
    id: 'notes',
    title: 'Notes',
    version: '1',
    auth: { jwks: staticJwks(await plane.jwks()), issuer: 'plane' },
    abilities: [whoami],
    logger: false,
  });
  return plane;
}

const session = { abilityId: 'notes.store', targetServiceId: 'notes', scopes: ['notes.read'] };

test('plane.abilitySession: a misspelt `caler` is refused, so the call never runs as the plane itself', async () => {
  const plane = await deployment();
  refusedNaming(
    () =>
      plane.abilitySession({
        ...session,
        caler: { id: 'user-7', kind: 'user', orgId: 'acme' },
      } as never),
    'abilitySession: unknown option `caler` ',
    '(accepted: abilityId, targetServiceId, scopes, caller, connInfo, idempotencyKey, requestId, timeoutMs)',
  );
  // Spelled right, the call carries the delegated subject.
  using delegated = plane.abilitySession<{ whoami(input: object): Promise<unknown> }>({
    ...session,
    caller: { id: 'user-7', kind: 'user', orgId: 'acme' },
  });
  assert.deepEqual(await delegated.whoami({}), {
    serviceId: 'plane',
    subject: { id: 'user-7', orgId: 'acme' },
  });
});

test('plane.abilitySession: a misspelt caller field (`orgID`) is refused rather than dropping the org', async () => {
  const plane = await deployment();
  refusedNaming(
    () =>
      plane.abilitySession({
        ...session,
        caller: { id: 'user-7', kind: 'user', orgID: 'acme' },
      } as never),
    'abilitySession: `caller`: unknown field `orgID` (accepted: id, kind, orgId, principalKind)',
  );
});

test('plane.abilitySession: an ability of another service and an empty scope list are refused when the session is opened', async () => {
  const plane = await deployment();
  const mismatch = refusedNaming(
    () => plane.abilitySession({ ...session, abilityId: 'billing.ledger' }),
    '`abilityId` "billing.ledger"',
    '"notes."',
  );
  assert.equal(mismatch.reason, 'ability_target_mismatch');
  // A prefix of the id is not enough: the service part ends at the dot.
  refusedNaming(
    () => plane.abilitySession({ ...session, abilityId: 'notes-v2.store' }),
    'notes-v2',
  );
  const empty = refusedNaming(() => plane.abilitySession({ ...session, scopes: [] }), '`scopes`');
  assert.equal(empty.reason, 'scopes_required');
  refusedNaming(() => plane.abilitySession({ ...session, scopes: [''] }), '`scopes`');
  refusedNaming(
    () => plane.abilitySession({ ...session, scopes: 'notes.read' } as never),
    '`scopes`',
  );
});

test('plane.abilitySession: every documented option is accepted', async () => {
  const plane = await deployment();
  using s = plane.abilitySession<{ whoami(input: object): Promise<unknown> }>({
    ...session,
    caller: { id: 'user-7', kind: 'user', orgId: 'acme', principalKind: 'api_key' },
    connInfo: { remote: { address: '127.0.0.1' } },
    idempotencyKey: 'key-1',
    requestId: 'req-1',
    timeoutMs: 5000,
  });
  assert.deepEqual(await s.whoami({}), {
    serviceId: 'plane',
    subject: { id: 'user-7', orgId: 'acme' },
  });
});

test('plane.issueCapabilityToken: a misspelt subject field (`orgID`) or option (`ttlSecond`) is refused, nothing minted', async () => {
  const plane = await deployment();
  const mint = { callerServiceId: 'plane', callerAccess: 'plane' as const, ...session };
  await rejectedNaming(
    plane.issueCapabilityToken({ ...mint, subject: { id: 'user-7', orgID: 'acme' } as never }),
    'issueCapabilityToken: `subject`: unknown field `orgID` (accepted: id, kind, orgId)',
  );
  await rejectedNaming(
    plane.issueCapabilityToken({ ...mint, ttlSecond: 30 } as never),
    'issueCapabilityToken: unknown option `ttlSecond`',
  );
  await rejectedNaming(
    plane.issueBrokeredCapabilityToken({ ...mint, subjet: { id: 'u' } } as never),
    'issueBrokeredCapabilityToken: unknown option `subjet`',
  );
  const issued = await plane.issueCapabilityToken({
    ...mint,
    subject: { id: 'user-7', kind: 'api_key', orgId: 'acme' },
    ttlSeconds: 30,
    confirmationJkt: 'a'.repeat(43),
    context: {},
    requestId: 'req-1',
  });
  assert.equal(issued.claims.spo, 'acme');
  assert.equal(issued.claims.cnf?.jkt, 'a'.repeat(43));
});

test('plane.issueCapabilityTokenForCaller: a key beside the caller is refused, a subject still 403', async () => {
  const plane = await deployment();
  const request = {
    caller: { clientId: 'billing', serviceId: 'billing' },
    targetServiceId: 'notes',
    scopes: ['notes.read'],
  };
  // A confirmationJkt the plane never proved must not reach the token.
  await rejectedNaming(
    plane.issueCapabilityTokenForCaller({ ...request, confirmationJkt: 'a'.repeat(43) } as never),
    'issueCapabilityTokenForCaller: unknown option `confirmationJkt`',
  );
  await assert.rejects(
    plane.issueCapabilityTokenForCaller({ ...request, subject: { id: 'u' } } as never),
    (error: unknown) => (error as { status?: number }).status === 403,
  );
  const issued = await plane.issueCapabilityTokenForCaller({
    ...request,
    abilityId: 'notes.store',
    ttlSeconds: 30,
    context: {},
    requestId: 'req-1',
  });
  assert.equal(issued.claims.sub, 'billing');
});

test('createControlPlane: a misspelt `ttlSecond` or `timeout.maxMS` is refused', async () => {
  const { k1 } = await testKeys();
  const base = { signingKeys: [k1.entry], services: [], log: false as const };
  refusedNaming(
    () => createControlPlane({ ...base, ttlSecond: 30 } as never),
    'createControlPlane: unknown option `ttlSecond`',
    'ttlSeconds',
  );
  refusedNaming(
    () => createControlPlane({ ...base, timeout: { defaultMs: 500, maxMS: 1000 } as never }),
    'createControlPlane: `timeout`: unknown option `maxMS`',
  );
  refusedNaming(
    () => createControlPlane({ ...base, discoveryCache: { tokens: false } as never }),
    'discoveryCache: unknown option `tokens` (accepted: token, openapi, default)',
  );
  refusedNaming(
    () => createControlPlane({ ...base, signingKeys: [{ ...k1.entry, alg: 'ES256' }] as never }),
    'Capability signing key 0: unknown field `alg` (accepted: kid, secret)',
  );
});

test('createControlPlane: every documented option is accepted; one not built yet reaches its own refusal', async () => {
  const { k1 } = await testKeys();
  const events: string[] = [];
  const documented = {
    id: 'plane',
    issuer: 'https://plane.example',
    signingKeys: [k1.entry],
    authenticateCaller: hmacServiceClientAuth({
      clients: { billing: { serviceId: 'billing', secret: 's3cret-s3cret-s3cret-s3cret' } },
      maxSkewSeconds: 30,
      log: false,
      now: Date.now,
    }),
    services: [],
    httpCache: { maxAgeSeconds: 5, staleWhileRevalidateSeconds: 0, tags: ['plane'] },
    discoveryCache: {
      token: memoryRegistryCache(),
      openapi: false as const,
      default: false as const,
    },
    timeout: { defaultMs: 500, maxMs: 1000 },
    log: { log: (event: SvcLogEvent) => events.push(event.event) },
    ttlSeconds: 60,
    invocationMiddleware: false as const,
    openapi: {
      security: [{ bearer: [] }],
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      cache: memoryRegistryCache(),
      cacheTtlSeconds: 30,
      title: 'Plane API',
      version: '1.0.0',
    },
    publicOrigin: ['https://api.example.com', 'http://localhost:8787'],
    rpc: false as const,
    mcp: { allowedOrigins: ['https://app.example'], streamLimits: { maxItems: 5, maxBytes: 64 } },
  };
  const plane = createControlPlane(documented);
  assert.equal(typeof plane.fetch, 'function');
  refusedNaming(
    () => createControlPlane({ ...documented, mcp: { streamLimit: {} } as never }),
    'unknown option `streamLimit`',
  );
  refusedNaming(
    () => createControlPlane({ ...documented, mcp: { allowedOrigins: ['https://a.example/x'] } }),
    '`mcp.allowedOrigins[0]` must be an origin',
  );
  // The broker is built: `{}` and `{ path }` mount it; anything else is refused, naming it.
  assert.equal(typeof createControlPlane({ ...documented, rpc: {} }).fetch, 'function');
  assert.equal(
    typeof createControlPlane({ ...documented, rpc: { path: '/broker' } }).fetch,
    'function',
  );
  for (
    const bad of [true, { path: 'rpc' }, { path: '/a/../b' }, { route: '/rpc' }, {
      path: JWKS_PATH,
    }]
  ) {
    const error = refusedNaming(
      () => createControlPlane({ ...documented, rpc: bad as never }),
      '`rpc`',
    );
    assert.equal(error.reason, 'invalid_rpc_option', JSON.stringify(bad));
  }
  const notMiddleware = refusedNaming(
    () => createControlPlane({ ...documented, invocationMiddleware: {} as never }),
    '`invocationMiddleware` must be a Hono middleware',
  );
  assert.equal(notMiddleware.reason, 'invalid_invocation_middleware');
});

test('caller authenticators: a misspelt client field is refused, naming the client', async () => {
  const { client } = await testKeys();
  refusedNaming(
    () =>
      hmacServiceClientAuth({
        clients: { billing: { serviceId: 'billing', secret: 's3cret', secert: 'x' } as never },
      }),
    'hmacServiceClientAuth: client billing: unknown field `secert` (accepted: serviceId, secret)',
  );
  refusedNaming(
    () =>
      jwkServiceClientAuth({
        clients: {
          billing: { serviceId: 'billing', keys: [client.publicJwk], key: {} } as never,
        },
      }),
    'jwkServiceClientAuth: client billing: unknown field `key` (accepted: serviceId, keys)',
  );
  refusedNaming(
    () => hmacServiceClientAuth({ clients: { billing: null as never } }),
    'client billing must be { serviceId, secret }',
  );
});

test('httpService: a misspelt `createWebsocket` is refused, every documented option accepted', () => {
  const grants = [{ caller: 'plane', scopes: ['notes.read'] }];
  refusedNaming(
    () =>
      httpService({
        id: 'notes',
        url: 'https://notes.example',
        grants,
        createWebsocket: (url: string) => new WebSocket(url),
      } as never),
    'httpService: unknown option `createWebsocket` (accepted: id, url, grants, createWebSocket, fetch)',
  );
  const endpoint = httpService({
    id: 'notes',
    url: 'https://notes.example',
    grants,
    createWebSocket: () => {
      throw new Error('never dialled here');
    },
    fetch: () => Promise.resolve(new Response('')),
  });
  assert.equal(endpoint.kind, 'http');
});

test('cloudflareServiceBinding: an unknown option is refused, every documented option accepted', () => {
  const binding = { fetch: () => Promise.resolve(new Response('')) };
  const grants = [{ caller: 'plane', scopes: ['notes.read'] }];
  refusedNaming(
    () => cloudflareServiceBinding({ id: 'notes', binding, grants, url: 'https://x' } as never),
    'cloudflareServiceBinding: unknown option `url` ',
    '(accepted: id, binding, grants, abilityRpc, createWebSocket)',
  );
  const endpoint = cloudflareServiceBinding({
    id: 'notes',
    binding,
    grants,
    abilityRpc: { connectAbility: () => Promise.reject(new Error('never connected here')) },
    createWebSocket: () => {
      throw new Error('never dialled here');
    },
  });
  assert.equal(endpoint.kind, 'cloudflare-binding');
});

test('localService: a control plane passed as the service is refused at construction, as is an unknown option', async () => {
  const { k1 } = await testKeys();
  const other = createControlPlane({
    id: 'other',
    signingKeys: [k1.entry],
    services: [],
    log: false,
  });
  const grants = [{ caller: 'plane', scopes: ['notes.read'] }];
  const error = refusedNaming(
    () => localService({ id: 'notes', service: other as never, grants }),
    'localService: `service`',
    'createService',
  );
  assert.equal(error.reason, 'invalid_service_endpoint');
  const service = createService({
    id: 'notes',
    title: 'Notes',
    version: '1',
    auth: { jwks: { keys: [] }, issuer: 'plane' },
    abilities: [whoami],
    logger: false,
  });
  refusedNaming(
    () => localService({ id: 'notes', service, grants, url: 'https://notes' } as never),
    'localService: unknown option `url` (accepted: id, service, grants)',
  );
  assert.equal(localService({ id: 'notes', service, grants }).kind, 'local');
});

test('memoryRegistryCache, generateSigningKeyEntry, capabilityTokenEntrypoint: unknown options refused, documented ones accepted', async () => {
  refusedNaming(
    () => memoryRegistryCache({ maxEntry: 10 } as never),
    'memoryRegistryCache: unknown option `maxEntry` (accepted: maxEntries, now)',
  );
  memoryRegistryCache({ maxEntries: 10, now: Date.now });
  await rejectedNaming(
    generateSigningKeyEntry({ fromat: 'pem' } as never),
    'generateSigningKeyEntry: unknown option `fromat` (accepted: kid, format)',
  );
  await rejectedNaming(generateSigningKeyEntry({ format: 'PEM' } as never), '`format`');
  const pem = await generateSigningKeyEntry({ kid: 'k-pem', format: 'pem' });
  assert.equal(pem.kid, 'k-pem');
  assert.ok(pem.secret.startsWith('-----BEGIN PRIVATE KEY-----'));
  const plane = await deployment();
  refusedNaming(
    () => capabilityTokenEntrypoint(plane, { callerServiceID: 'billing' } as never),
    'capabilityTokenEntrypoint: unknown option `callerServiceID` (accepted: callerServiceId, context, log)',
  );
  const entrypoint = capabilityTokenEntrypoint(plane, {
    callerServiceId: 'billing',
    context: {},
    log: false,
  });
  const answer = await entrypoint.requestCapabilityToken({
    callerServiceId: 'billing',
    targetServiceId: 'notes',
    scopes: ['notes.read'],
  });
  assert.deepEqual(answer.scopes, ['notes.read']);
});
