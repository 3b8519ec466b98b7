// Design principle "fail closed, say why; nothing silently dropped": every service-side reader of
// an options object refuses a key it does not know, at construction, naming it; every key the
// contract documents is still accepted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { defineAbility } from '../../src/service/ability.ts';
import { defineCapabilities } from '../../src/service/capabilities.ts';
import { jwksFromServiceBinding, jwksFromUrl, staticJwks } from '../../src/service/jwks-sources.ts';
import { abilityMethod } from '../../src/service/method.ts';
import { jwkCapabilityProofSigner } from '../../src/caller/proof-signer.ts';
import { createService } from '../../src/service/service.ts';
import type { ServiceOptions } from '../../src/service/service-options.ts';
import {
  cloudflareServiceBindingRpc,
  httpBatchRpc,
} from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { webSocketPairUpgrader } from '../../src/service/websocket-upgrade.ts';
import { testKeys } from '../support/keys.ts';
import { abilitySession, disposeAbilitySession } from '../../src/caller/ability-session.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
  controlPlaneRpcTokenRequester,
} from '../../src/caller/token-requesters.ts';
import { refusedNaming } from '../support/configuration-refusals.ts';

const whoami = defineAbility({
  id: 'notes.store',
  methods: {
    whoami: abilityMethod({
      input: z.object({}),
      output: z.object({ serviceId: z.string() }),
      scopes: ['notes.read'],
    }),
  },
  handler: ({ identity }) => ({ whoami: () => ({ serviceId: identity.serviceId }) }),
});

const baseOptions = (): ServiceOptions => ({
  id: 'notes',
  title: 'Notes',
  version: '1',
  auth: { jwks: staticJwks({ keys: [] }), issuer: 'plane' },
  abilities: [whoami],
  logger: false,
});

const withOptions = (extra: Record<string, unknown>) =>
  createService({ ...baseOptions(), ...extra } as ServiceOptions);

test('createService: a misspelt `ingres` is refused, so ingress enforcement is never silently off', () => {
  const error = refusedNaming(
    () => withOptions({ ingres: { brokerServiceId: 'plane' } }),
    'createService: unknown option `ingres`',
    'ingress',
  );
  assert.equal(error.reason, 'configuration');
  // Spelled right, the same option is enforced and advertised.
  const enforced = withOptions({ ingress: { brokerServiceId: 'plane' } });
  assert.deepEqual(enforced.discovery().ingress, { required: true, brokerServiceId: 'plane' });
});

test('createService: the ingress option itself must be exactly { brokerServiceId }', () => {
  refusedNaming(
    () => withOptions({ ingress: { brokerServiceID: 'plane' } }),
    'createService: `ingress`: unknown option `brokerServiceID` (accepted: brokerServiceId)',
  );
  refusedNaming(() => withOptions({ ingress: true }), '`ingress` must be an object');
});

test('createService: misspelt keys at the top level and in each nested object are refused, naming the key', () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ log: false }, 'createService: unknown option `log`'],
    [
      { auth: { jwks: { keys: [] }, issuer: 'plane', audience: 'x' } },
      '`auth`: unknown option `audience`',
    ],
    [{ timeout: { maxMs: 2000, defaultMS: 500 } }, '`timeout`: unknown option `defaultMS`'],
    [{ timeout: { methodMS: 500 } }, '(accepted: methodMs, defaultMs, maxMs)'],
    [{ requestId: { generate: () => 'id' } }, '`requestId`: unknown option `generate`'],
    [{ httpCache: { maxAge: 5 } }, '`httpCache`: unknown option `maxAge`'],
    [{ capabilities: { serviceId: 'notes', scope: {} } }, 'unknown field `scope`'],
  ];
  for (const [extra, mention] of cases) refusedNaming(() => withOptions(extra), mention);
});

test('createService: every documented option is accepted together', () => {
  const events: string[] = [];
  const service = createService({
    id: 'notes',
    title: 'Notes',
    version: '1',
    auth: { jwks: { keys: [] }, issuer: 'plane' },
    ingress: { brokerServiceId: 'plane' },
    capabilities: defineCapabilities({
      serviceId: 'notes',
      scopes: { 'notes.read': { description: 'Read notes' } },
    }),
    abilities: [whoami],
    httpCache: { maxAgeSeconds: 5, staleWhileRevalidateSeconds: 0, tags: ['notes'] },
    timeout: { methodMs: 2000, defaultMs: 500, maxMs: 1000 },
    logger: { log: (event: SvcLogEvent) => events.push(event.event) },
    requestId: { generator: () => 'req-1' },
    middleware: [async (_c, next) => await next()],
    upgradeWebSocket: webSocketPairUpgrader,
  });
  assert.equal(service.discovery().id, 'notes');
});

test('websocketRpc: a misspelt `createWebsocket` is refused at construction', () => {
  refusedNaming(
    () =>
      websocketRpc('https://notes.example/rpc/notes.store', {
        createWebsocket: () => undefined,
      } as never),
    'websocketRpc: unknown option `createWebsocket` (accepted: createWebSocket, openTimeoutMs)',
  );
  const transport = websocketRpc('https://notes.example/rpc/notes.store', {
    createWebSocket: () => {
      throw new Error('never dialled here');
    },
    openTimeoutMs: 1000,
  });
  assert.equal(transport.kind, 'websocket');
});

test('websocketRpc: no factory on a runtime without a global WebSocket is refused at construction, naming the option', (t) => {
  const scope = globalThis as Record<string, unknown>;
  const descriptor = Object.getOwnPropertyDescriptor(scope, 'WebSocket');
  if (descriptor !== undefined && !descriptor.configurable) {
    t.skip('this runtime will not let the global WebSocket be hidden');
    return;
  }
  // Shadowed by an own property rather than deleted: workerd keeps it on the global prototype.
  Object.defineProperty(scope, 'WebSocket', { value: undefined, configurable: true });
  try {
    const error = refusedNaming(
      () => websocketRpc('https://notes.example/rpc/notes.store'),
      'websocketRpc',
      '`createWebSocket`',
    );
    assert.equal(error.reason, 'websocket_unavailable');
    // A factory is all it takes.
    websocketRpc('https://notes.example/rpc/notes.store', {
      createWebSocket: () => {
        throw new Error('never dialled here');
      },
    });
  } finally {
    if (descriptor !== undefined) Object.defineProperty(scope, 'WebSocket', descriptor);
    else delete scope.WebSocket;
  }
});

test('httpBatchRpc and cloudflareServiceBindingRpc: an unknown option is refused, `url` only beside a fetch target', () => {
  const fetchTarget = () => Promise.resolve(new Response(''));
  refusedNaming(
    () => httpBatchRpc(fetchTarget, { URL: 'https://svc.internal/rpc/notes.store' } as never),
    'httpBatchRpc: unknown option `URL` (accepted: url)',
  );
  refusedNaming(
    () =>
      httpBatchRpc('https://notes.example/rpc/notes.store', {
        url: 'https://elsewhere.example/rpc/notes.store',
      }),
    'httpBatchRpc: `url` applies to a fetch-function target only',
  );
  refusedNaming(
    () => httpBatchRpc(fetchTarget, { url: 'not a url' }),
    '`url` is not an absolute URL',
  );
  refusedNaming(
    () => cloudflareServiceBindingRpc({ fetch: fetchTarget }, { path: '/rpc/x' } as never),
    'cloudflareServiceBindingRpc: unknown option `path`',
  );
  assert.equal(httpBatchRpc(fetchTarget, { url: 'https://svc.internal/rpc/x' }).kind, 'http-batch');
  assert.equal(
    cloudflareServiceBindingRpc({ fetch: fetchTarget }, { url: 'https://svc.internal/rpc/x' }).kind,
    'http-batch',
  );
});

test('jwksFromUrl and jwksFromServiceBinding: a misspelt cache option is refused, the documented ones accepted', () => {
  const fetchJwks = () => Promise.resolve(Response.json({ keys: [] }));
  refusedNaming(
    () => jwksFromUrl('https://plane.example/.well-known/svc/jwks.json', { cacheTtl: 0 } as never),
    'jwksFromUrl: unknown option `cacheTtl` ',
    '(accepted: cacheTtlSeconds, fetchTimeoutMs, failureCooldownMs, fetch)',
  );
  refusedNaming(
    () => jwksFromServiceBinding({ fetch: fetchJwks }, { fetch: fetchJwks } as never),
    'jwksFromServiceBinding: unknown option `fetch` ',
    '(accepted: cacheTtlSeconds, fetchTimeoutMs, failureCooldownMs, url)',
  );
  const timings = { cacheTtlSeconds: 0, fetchTimeoutMs: 100, failureCooldownMs: 0 };
  jwksFromUrl('https://plane.example/.well-known/svc/jwks.json', { ...timings, fetch: fetchJwks });
  jwksFromServiceBinding({ fetch: fetchJwks }, { ...timings, url: 'https://plane/jwks.json' });
});

test('jwkCapabilityProofSigner: a misspelt option is refused, the documented ones accepted', async () => {
  const { client } = await testKeys();
  refusedNaming(
    () => jwkCapabilityProofSigner({ privateJwk: client.privateJwk, clock: Date.now } as never),
    'jwkCapabilityProofSigner: unknown option `clock` (accepted: privateJwk, now)',
  );
  refusedNaming(
    () => jwkCapabilityProofSigner({ privateJwk: client.privateJwk, now: 5 } as never),
    '`now` must be a function',
  );
  assert.equal(
    typeof jwkCapabilityProofSigner({ privateJwk: client.privateJwk, now: Date.now }),
    'function',
  );
});

test('definitions: an unknown field of an ability, its rpc, a method, its rest or mcp projection, or a catalog is refused', () => {
  const method = { input: z.object({ id: z.string() }), output: z.object({}) };
  refusedNaming(
    () =>
      abilityMethod({ ...method, rest: { method: 'get', path: '/x/{id}', statsu: 201 } } as never),
    'abilityMethod: rest: unknown field `statsu` (accepted: method, path, status)',
  );
  refusedNaming(
    () => abilityMethod({ ...method, mcp: { name: 'x', description: 'y', titel: 'z' } } as never),
    'abilityMethod: mcp: unknown field `titel` (accepted: name, description, title)',
  );
  refusedNaming(
    () => abilityMethod({ ...method, mcpPrompt: { name: 'x', args: [] } } as never),
    'abilityMethod: mcpPrompt: unknown field `args` (accepted: name, title, description)',
  );
  refusedNaming(
    () => abilityMethod({ ...method, mcpResource: { uri: 'a:b', name: 'n', mime: 'x' } } as never),
    'abilityMethod: mcpResource: unknown field `mime` (accepted: uri, name, title, description, mimeType)',
  );
  refusedNaming(
    () =>
      defineAbility({
        id: 'notes.x',
        methods: { get: abilityMethod(method) },
        handler: () => ({ get: () => ({}) }),
        exposrue: 'published',
      } as never),
    'defineAbility(notes.x): unknown field `exposrue`',
  );
  refusedNaming(
    () => defineCapabilities({ serviceID: 'notes' } as never),
    'defineCapabilities: unknown field `serviceID` (accepted: serviceId, scopes)',
  );
  const projected = abilityMethod({
    ...method,
    rest: { method: 'get', path: '/x/{id}', status: 200 },
    mcp: { name: 'x', description: 'y' },
  });
  assert.equal(projected.rest?.status, 200);
});

const SESSION_BASE = {
  abilityId: 'notes.store',
  callerServiceId: 'caller',
  targetServiceId: 'notes',
  scopes: ['notes.read'],
  requestToken: () => Promise.resolve('token'),
  transport: httpBatchRpc(() => Promise.resolve(new Response(null, { status: 204 }))),
};

test('abilitySession: a misspelt `timeoutMS` is refused at creation, not left without a budget', () => {
  refusedNaming(() => abilitySession({ ...SESSION_BASE, timeoutMS: 100 } as never), 'timeoutMS');
  // Every documented option together is accepted.
  const session = abilitySession({
    ...SESSION_BASE,
    timeoutMs: 100,
    idempotencyKey: 'key-1',
    requestId: 'req-1',
    connInfo: { remoteAddr: '127.0.0.1' },
    proveTokenPossession: () => Promise.resolve('proof'),
  } as never);
  disposeAbilitySession(session);
});

test('abilitySession: an ability of another service than targetServiceId is refused at creation', () => {
  const error = refusedNaming(
    () => abilitySession({ ...SESSION_BASE, abilityId: 'notes-v2.store' }),
    'notes-v2.store',
    'notes',
  );
  assert.equal(error.reason, 'ability_target_mismatch');
});

test('token requesters: a misspelt option is refused at creation, naming it', async () => {
  const { client } = await testKeys();
  const hmac = {
    clientId: 'hc1',
    clientSecret: 'an-hmac-client-secret-of-enough-length',
    controlPlaneUrl: 'https://plane.test',
  };
  refusedNaming(
    () => controlPlaneHmacTokenRequester({ ...hmac, ttlSecond: 60 } as never),
    'ttlSecond',
  );
  controlPlaneHmacTokenRequester({ ...hmac, ttlSeconds: 60, fetch: () => Promise.reject() });
  const jwk = {
    clientId: 'jc1',
    keyId: 'k1',
    privateJwk: client.privateJwk,
    controlPlaneUrl: 'https://plane.test',
  };
  refusedNaming(
    () => controlPlaneJwkTokenRequester({ ...jwk, isuer: 'https://plane.test' } as never),
    'isuer',
  );
  controlPlaneJwkTokenRequester({ ...jwk, issuer: 'https://plane.test', ttlSeconds: 60 });
  const rpc = {
    binding: { requestCapabilityToken: () => Promise.reject(new Error('unused')) },
    callerServiceId: 'caller',
  };
  refusedNaming(() => controlPlaneRpcTokenRequester({ ...rpc, ttl: 60 } as never), 'ttl');
  controlPlaneRpcTokenRequester({ ...rpc, ttlSeconds: 60 });
});
