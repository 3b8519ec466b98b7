// The public API as an installing project sees it, everything imported from the package entry:
// list options accept readonly lists, the option types of the factories can be named to build an
// options object ahead of the call, and `ControlPlane` has the methods it documents. `npx tsc
// --noEmit` fails if an `@ts-expect-error` below stops being an error or an equality stops
// holding; the tests then run the same objects, so each shape also works.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Hono, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import {
  type AbilityDefinition,
  abilityMethod,
  type AbilityOptions,
  type AbilityRpc,
  type AbilitySession,
  type AbilitySessionMethods,
  type AbilitySessionOptions,
  type AbilityTransport,
  AbilityValidationError,
  type CapabilityCatalogOptions,
  type CapabilityPublicJwk,
  type CapabilityTokenBinding,
  type CapabilityTokenEntrypointRequest,
  type CloudflareServiceBindingOptions,
  type ControlPlane,
  controlPlaneHmacTokenRequester,
  type ControlPlaneHmacTokenRequesterOptions,
  type ControlPlaneJwkTokenRequesterOptions,
  type ControlPlaneOptions,
  type ControlPlaneRpcTokenRequesterOptions,
  createControlPlane,
  createService,
  defineAbility,
  defineCapabilities,
  generateSigningKeyEntry,
  type GenerateSigningKeyOptions,
  hmacServiceClientAuth,
  type HmacServiceClientAuthOptions,
  httpBatchRpc,
  type HttpBatchRpcOptions,
  httpService,
  type HttpServiceOptions,
  type InProcessSessionOptions,
  type IssueCapabilityTokenOptions,
  type IssuedCapabilityToken,
  type IssueForCallerOptions,
  type JwkCapabilityProofSignerOptions,
  jwkServiceClientAuth,
  type JwkServiceClientAuthOptions,
  type JwksServiceBinding,
  localService,
  type LocalServiceOptions,
  memoryRegistryCache,
  type MemoryRegistryCacheOptions,
  type MethodOptions,
  type PlaneVariables,
  type RestProjectionOptions,
  type RpcFetch,
  type ServiceBindingFetcher,
  type ServiceEndpoint,
  type ServiceGrant,
  type ServiceOptions,
  staticJwks,
  type StreamSource,
  type TokenEndpointFetch,
  type VerifyCapabilityTokenOptions,
} from '../../mod.ts';

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;

const NOTES_READ = ['notes.read'] as const;
const TRANSPORTS = ['http-batch'] as const satisfies readonly AbilityTransport[];
const CLIENT_SECRET = 'public-types-secret-of-enough-length';

const get = abilityMethod({
  input: z.object({ id: z.string() }),
  output: z.object({ id: z.string(), by: z.string() }),
  scopes: NOTES_READ,
});

const noteMethods = { get };

// A pre-built options object, named by its exported type.
const notesOptions: AbilityOptions<typeof noteMethods> = {
  id: 'notes.store',
  scopes: NOTES_READ,
  rpc: { transports: TRANSPORTS },
  methods: noteMethods,
  handler: ({ identity }) => ({ get: ({ id }) => ({ id, by: identity.serviceId }) }),
};
const notes = defineAbility(notesOptions);
type NotesApi = AbilityRpc<typeof notes>;

// The definition's own readonly lists go back in wherever a list option is taken.
const reusedScopes: readonly string[] = notes.scopes;
const grants: readonly ServiceGrant[] = [
  { caller: 'billing', scopes: reusedScopes },
  { caller: 'plane', scopes: NOTES_READ },
];

// A misspelt key in a pre-built options object is a compile error for every exported type.
void (() => {
  const id = 'notes';
  const service = createService({
    id,
    title: 'n',
    version: '1',
    auth: { jwks: { keys: [] }, issuer: 'p' },
    abilities: [],
  });
  // @ts-expect-error `grant` is not an option
  const http: HttpServiceOptions = { id, url: 'https://n', grants, grant: [] };
  // @ts-expect-error `servce` is not an option
  const local: LocalServiceOptions = { id, servce: service, grants };
  const binding: CloudflareServiceBindingOptions = {
    id,
    binding: { fetch: (request) => service.fetch(request) } satisfies ServiceBindingFetcher,
    grants,
    // @ts-expect-error `createWebsocket` is not an option
    createWebsocket: () => undefined,
  };
  // @ts-expect-error `maxSkew` is not an option
  const hmac: HmacServiceClientAuthOptions = { clients: {}, maxSkew: 10 };
  // @ts-expect-error `maxAssertionTtl` is not an option
  const jwk: JwkServiceClientAuthOptions = { clients: {}, maxAssertionTtl: 10 };
  // @ts-expect-error `uri` is not an option
  const batch: HttpBatchRpcOptions = { uri: 'https://n/rpc/notes.store' };
  const method: MethodOptions<typeof get.input, typeof get.output> = {
    input: get.input,
    output: get.output,
    // @ts-expect-error `scope` is not an option
    scope: [],
  };
  // @ts-expect-error `code` is not an option
  const rest: RestProjectionOptions = { method: 'get', path: '/notes/{id}', code: 200 };
  // @ts-expect-error `service` is not an option
  const catalog: CapabilityCatalogOptions = { service: id };
  // @ts-expect-error `key` is not an option
  const generate: GenerateSigningKeyOptions = { key: 'k1' };
  // @ts-expect-error `maxEntry` is not an option
  const cache: MemoryRegistryCacheOptions = { maxEntry: 5 };
  // @ts-expect-error `jwk` is not an option
  const prover: JwkCapabilityProofSignerOptions = { jwk: {} };
  const verify: VerifyCapabilityTokenOptions = {
    keys: staticJwks({ keys: [] }),
    issuer: 'p',
    audience: id,
    // @ts-expect-error `audiences` is not an option
    audiences: [],
  };
  const hmacRequester: ControlPlaneHmacTokenRequesterOptions = {
    clientId: 'billing',
    controlPlaneUrl: 'https://plane',
    clientSecret: CLIENT_SECRET,
    // @ts-expect-error `ttl` is not an option
    ttl: 60,
  };
  const jwkRequester: ControlPlaneJwkTokenRequesterOptions = {
    clientId: 'billing',
    controlPlaneUrl: 'https://plane',
    keyId: 'k',
    privateJwk: {},
    // @ts-expect-error `issuers` is not an option
    issuers: 'plane',
  };
  const rpcRequester: ControlPlaneRpcTokenRequesterOptions = {
    binding: { requestCapabilityToken: () => Promise.resolve({}) } satisfies CapabilityTokenBinding,
    // @ts-expect-error `callerService` is not an option
    callerService: 'billing',
  };
  // @ts-expect-error `ingres` is not an option
  const serviceOptions: ServiceOptions = { ...notesService(), ingres: {} };
  // @ts-expect-error `ttlSecond` is not an option
  const planeOptions: ControlPlaneOptions = { signingKeys: [], services: [], ttlSecond: 60 };
  const session: InProcessSessionOptions = {
    abilityId: notes.id,
    targetServiceId: id,
    scopes: NOTES_READ,
    // @ts-expect-error `caler` is not an option
    caler: { id: 'u', kind: 'user' },
  };
  const callerSession: AbilitySessionOptions = {
    abilityId: notes.id,
    callerServiceId: 'billing',
    targetServiceId: id,
    // The definition's readonly list, as is.
    scopes: notes.scopes,
    requestToken: () => Promise.resolve('token'),
    transport: httpBatchRpc((request) => service.fetch(request)),
    // @ts-expect-error `timeoutMS` is not an option
    timeoutMS: 100,
  };
  void [
    http,
    local,
    binding,
    hmac,
    jwk,
    batch,
    method,
    rest,
    catalog,
    generate,
    cache,
    prover,
    verify,
    hmacRequester,
    jwkRequester,
    rpcRequester,
    serviceOptions,
    planeOptions,
    session,
    callerSession,
  ];
});

// ControlPlane: each documented method with its signature, and what createControlPlane returns.
const planeTypes: [
  Equals<ReturnType<typeof createControlPlane>, ControlPlane>,
  Equals<ControlPlane['app'], Hono>,
  Equals<
    ControlPlane['fetch'],
    (request: Request, env?: unknown, ctx?: unknown) => Promise<Response>
  >,
  Equals<ControlPlane['jwks'], (env?: unknown) => Promise<{ keys: CapabilityPublicJwk[] }>>,
  Equals<
    ControlPlane['issueCapabilityToken'],
    (request: IssueCapabilityTokenOptions) => Promise<IssuedCapabilityToken>
  >,
  Equals<
    ControlPlane['issueBrokeredCapabilityToken'],
    (request: IssueCapabilityTokenOptions) => Promise<IssuedCapabilityToken>
  >,
  Equals<
    ControlPlane['issueCapabilityTokenForCaller'],
    (request: IssueForCallerOptions) => Promise<IssuedCapabilityToken>
  >,
  Equals<Parameters<ControlPlane['abilitySession']>, [InProcessSessionOptions, unknown?]>,
  Equals<ReturnType<ControlPlane['ready']>, Promise<void>>,
  Equals<AbilitySessionMethods<NotesApi>['get'], NotesApi['get']>,
] = [true, true, true, true, true, true, true, true, true, true];

// Never invoked: these lines exist for the type checker.
void ((plane: ControlPlane) => {
  // @ts-expect-error every direct mint states callerAccess
  void plane.issueCapabilityToken({ callerServiceId: 'b', targetServiceId: 'notes', scopes: [] });
  void plane.issueCapabilityTokenForCaller({
    caller: { clientId: 'b', serviceId: 'b' },
    targetServiceId: 'notes',
    scopes: NOTES_READ,
    // @ts-expect-error a caller never asserts a subject
    subject: { id: 'u' },
  });
  const sessionOptions: InProcessSessionOptions = {
    abilityId: notes.id,
    targetServiceId: 'notes',
    scopes: NOTES_READ,
  };
  const typed = plane.abilitySession<NotesApi>(sessionOptions);
  const untyped = plane.abilitySession(sessionOptions);
  const sessionTypes: [
    Equals<typeof typed, AbilitySession<NotesApi>>,
    Equals<typeof untyped, AbilitySession<Record<string, (input: unknown) => unknown>>>,
  ] = [true, true];
  void sessionTypes;
  // @ts-expect-error the session is typed by the ability
  void typed.gett({ id: '1' });
  // @ts-expect-error a plane is not an in-process service (it has no discovery document)
  void localService({ id: 'plane', service: plane, grants: [] });
});

// Every other exported name a factory's parameter uses can annotate a value.
const items: StreamSource<number> = [1, 2];
const rpcFetch: RpcFetch = (request) => Promise.resolve(new Response(request.url));
const jwksBinding: JwksServiceBinding = { fetch: rpcFetch };

function notesService(): ServiceOptions {
  return {
    id: 'notes',
    title: 'Notes',
    version: '1',
    auth: { jwks: { keys: [] }, issuer: 'plane' },
    abilities: [notes],
  };
}

/** A plane and an in-process notes service, built from readonly lists throughout. */
async function deployment(middleware: readonly MiddlewareHandler[] = []) {
  const signingKeys = [await generateSigningKeyEntry({ kid: 'k1' })] as const;
  const { d: _private, ...publicKey }: JsonWebKey = JSON.parse(signingKeys[0].secret);
  const authenticators = [
    hmacServiceClientAuth({
      clients: { billing: { serviceId: 'billing', secret: CLIENT_SECRET } },
      log: false,
    }),
    jwkServiceClientAuth({
      clients: { shipping: { serviceId: 'shipping', keys: [publicKey] as const } },
      log: false,
    }),
  ] as const;
  const planeOptions: ControlPlaneOptions = {
    id: 'plane',
    signingKeys,
    authenticateCaller: authenticators,
    services: (): readonly ServiceEndpoint[] => services,
    httpCache: { tags: ['notes-plane'] as const },
    discoveryCache: memoryRegistryCache({ maxEntries: 8 }),
    log: false,
  };
  const plane = createControlPlane(planeOptions);
  const abilities = [notes] as const satisfies readonly AbilityDefinition<typeof noteMethods>[];
  const service = createService({
    ...notesService(),
    auth: { jwks: await plane.jwks(), issuer: 'plane' },
    abilities,
    middleware,
    logger: false,
  });
  const services = [localService({ id: 'notes', service, grants })] as const;
  return { plane, service };
}

test('readonly lists build a working plane, service and in-process session', async () => {
  assert.deepEqual(planeTypes, planeTypes.map(() => true));
  const { plane } = await deployment();
  const scopes: string[] = ['notes.read'];
  using session = plane.abilitySession<NotesApi>({
    abilityId: notes.id,
    targetServiceId: 'notes',
    scopes,
  });
  // The session copied its scopes: a list edited afterwards asks for nothing new.
  scopes[0] = 'notes.write';
  assert.deepEqual(await session.get({ id: '7' }), { id: '7', by: 'plane' });
  const jwks = await plane.fetch(new Request('https://plane/.well-known/svc/jwks.json'));
  assert.match(jwks.headers.get('Cache-Tag') ?? '', /notes-plane/);
});

test('a token endpoint caller reaches the plane through the exported requester types', async () => {
  const { plane } = await deployment();
  const fetchPlane: TokenEndpointFetch = (request) => plane.fetch(request);
  const options: ControlPlaneHmacTokenRequesterOptions = {
    clientId: 'billing',
    controlPlaneUrl: 'https://plane',
    clientSecret: CLIENT_SECRET,
    fetch: fetchPlane,
  };
  const requester = controlPlaneHmacTokenRequester(options);
  const token = await requester({
    callerServiceId: 'billing',
    targetServiceId: 'notes',
    abilityId: notes.id,
    scopes: [...NOTES_READ],
  });
  assert.equal(token.split('.').length, 3);
  const issued = await plane.issueCapabilityTokenForCaller({
    caller: { clientId: 'billing', serviceId: 'billing' },
    targetServiceId: 'notes',
    scopes: reusedScopes,
  });
  assert.deepEqual(issued.scopes, ['notes.read']);
  assert.equal(issued.claims.spa, 'service');
});

test('a readonly middleware list runs in order before the service routes', async () => {
  const seen: string[] = [];
  const middleware = [
    async (_c, next) => {
      seen.push('first');
      await next();
    },
    async (c, next) => {
      seen.push('second');
      await next();
      c.res.headers.set('X-Seen', seen.join(','));
    },
  ] as const satisfies readonly MiddlewareHandler[];
  const { service } = await deployment(middleware);
  const response = await service.fetch(new Request('https://notes/.well-known/svc/service.json'));
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('X-Seen'), 'first,second');
  assert.equal((await response.json()).id, 'notes');
});

test('the exported option types build working factories', async () => {
  const rest: RestProjectionOptions = { method: 'get', path: '/notes/{id}' };
  const methodOptions: MethodOptions<typeof get.input, typeof get.output> = {
    input: get.input,
    output: get.output,
    scopes: reusedScopes,
    rest,
  };
  assert.deepEqual(abilityMethod(methodOptions).rest, { ...rest, status: 200 });
  const catalog: CapabilityCatalogOptions = { serviceId: 'notes', scopes: { 'notes.read': {} } };
  assert.equal(defineCapabilities(catalog).serviceId, 'notes');
  const http: HttpServiceOptions = { id: 'notes', url: 'https://notes', grants, fetch: rpcFetch };
  const endpoint = httpService(http);
  assert.deepEqual(endpoint.grants.map((grant) => grant.scopes), [['notes.read'], ['notes.read']]);
  const response = await endpoint.fetchDiscovery({ signal: new AbortController().signal });
  assert.equal(await response.text(), 'https://notes/.well-known/svc/service.json');
  const batch: HttpBatchRpcOptions = { url: 'https://notes/rpc/notes.store' };
  assert.equal(httpBatchRpc(rpcFetch, batch).kind, 'http-batch');
  assert.equal((await jwksBinding.fetch(new Request('https://plane/jwks'))).status, 200);
  assert.deepEqual([...items], [1, 2]);
});

test('an AbilityValidationError keeps its own copy of a readonly issue list', () => {
  const issues = [{ message: 'Required', path: ['id'] }];
  const readonlyIssues: readonly { message: string; path?: (string | number)[] }[] = issues;
  const error = new AbilityValidationError('invalid input', { issues: readonlyIssues });
  issues.push({ message: 'added later', path: ['by'] });
  assert.deepEqual(error.issues, [{ message: 'Required', path: ['id'] }]);
  const request: CapabilityTokenEntrypointRequest = {
    callerServiceId: 'billing',
    targetServiceId: 'notes',
    scopes: NOTES_READ,
  };
  assert.deepEqual(request.scopes, ['notes.read']);
});

test('invocationMiddleware accepts a middleware typed with the plane variables', () => {
  const middleware: MiddlewareHandler<{ Variables: PlaneVariables }> = async (c, next) => {
    c.set('svcCaller', { id: 'alice', kind: 'user', principalKind: 'api_key' });
    // @ts-expect-error a caller kind outside the contract's two
    c.set('svcCaller', { id: 'alice', kind: 'admin' });
    assert.equal(c.get('svcInvocation').surface, 'rest');
    await next();
  };
  const options: Pick<ControlPlaneOptions, 'invocationMiddleware'> = {
    invocationMiddleware: middleware,
  };
  assert.equal(typeof options.invocationMiddleware, 'function');
});
