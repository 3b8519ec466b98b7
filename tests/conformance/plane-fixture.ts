// Control-plane variants of the checklist deployment (§1.2), for the plane's own conformance
// tests. Unlike `createFixture`, a deployment here can run several plane replicas with the same
// keys in different orders, redeploy the plane while the services keep their (short) JWKS
// caches, stop any service, add fake services with crafted discovery documents, and record
// every request a service receives together with the capability tokens it carried. What the
// harness builds by hand (signed requests, forged tokens, proofs) is in plane-credentials.ts
// and re-exported here.
import { CAPABILITY_TOKEN_TYP } from '../../src/core/capability-token.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import type { CallerAuthenticator } from '../../src/plane/caller-auth.ts';
import { type ControlPlane, createControlPlane, JWKS_PATH } from '../../src/plane/control-plane.ts';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import {
  cloudflareServiceBinding,
  httpService,
  localService,
  type ServiceEndpoint,
} from '../../src/plane/endpoints.ts';
import type { NativeAbilityBinding } from '../../src/caller/transports/cloudflare-native.ts';
import type { ConnectAbilityRequest } from '../../src/service/native-ability-rpc.ts';
import { abilitySession, type ProofSigner } from '../../src/caller/ability-session.ts';
import { jwksFromServiceBinding } from '../../src/service/jwks-sources.ts';
import { createService } from '../../src/service/service.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../src/caller/token-requesters.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { createFixtureStats, type FixtureStats, whoamiOnlyAbility } from './fixture-abilities.ts';
import {
  decodeJws,
  type FixtureKey,
  HMAC_SECRETS,
  planeKeys,
  type SigningKeyName,
} from './plane-credentials.ts';
import { fixtureServices, ISS, PLANE_ID, PLANE_URL } from './fixture.ts';
import { fetchOnlyService } from '../support/fetch-only-service.ts';
import {
  assertReadResponseMatchesOpenApi,
  type OpenApiDocumentLike,
} from '../support/openapi-response-check.ts';
import {
  FIXTURE_OPENAPI,
  fixtureInvocationMiddleware,
  type MiddlewareRecord,
} from './fixture-invocation-middleware.ts';
import type { SvcService } from '../../src/service/mod.ts';
import {
  REST_SERVICE_GRANTS,
  REST_SERVICE_ID,
  restFixtureService,
} from './fixture-rest-abilities.ts';

export * from './plane-credentials.ts';
export * from './fixture-invocation-middleware.ts';
export { ISS, PLANE_ID, PLANE_URL };

/** The JWKS route of the fixture plane. */
export const JWKS_URL = `${PLANE_URL}${JWKS_PATH}`;
/** The fixture's service ids. */
export type FixtureServiceId = 'svc-a' | 'svc-b' | 'svc-c' | 'svc-d';
/** The services a deployment may run: the fixture's, and svc-r with `restService`. */
export type DeployedServiceId = FixtureServiceId | typeof REST_SERVICE_ID;

/** One request a fixture service received. */
export interface ServiceRequestRecord {
  service: string;
  method: string;
  path: string;
  url: string;
  headers: Headers;
  /** Capability tokens found in the request body (HTTP-batch `authenticate` arguments). */
  tokens: string[];
  /** A native binding session's `connectAbility` request (method `CONNECT`). */
  native?: ConnectAbilityRequest;
}

/** Options of {@link createPlaneDeployment}. */
export interface PlaneDeploymentOptions {
  /** Signing-key order of the first plane replica; default `['k1', 'k2']`. */
  signingOrder?: SigningKeyName[];
  /** Service JWKS cache TTL in seconds; default 0.3 (rotation tests wait for it to pass). */
  jwksCacheTtlSeconds?: number;
  /** Extra plane options (httpCache, ttlSeconds, timeout, discoveryCache...). */
  plane?: Partial<Omit<ControlPlaneOptions, 'signingKeys' | 'authenticateCaller'>>;
  /**
   * Reach svc-a..svc-d as `httpService` endpoints whose HTTP and WebSocket legs are in memory
   * (through the recorded `serviceFetch`), so the plane can open streams; default in-process
   * `localService` endpoints (HTTP-batch only).
   */
  websocketServices?: boolean;
  /** Endpoints added to the fixture catalog (fake services). */
  extraServices?: ServiceEndpoint[];
  /**
   * Also deploy svc-r, the REST-rich service (fixture-rest-abilities.ts), verifying tokens like
   * the others and recorded, stoppable and counted the same way.
   */
  restService?: boolean;
  /** `false` configures no caller authentication; an array replaces the fixture's. */
  authenticateCaller?: false | CallerAuthenticator[];
  /** HMAC authenticator options (clock, skew). */
  hmac?: { maxSkewSeconds?: number; now?: () => number };
  /** JWK authenticator options (clock, assertion lifetime). */
  jwk?: { maxAssertionTtlSeconds?: number; now?: () => number };
  /**
   * Give `signingKeys` as a function and count its calls: the issuer resolves the signing
   * authority once per mint (after the grant check), so the count is the number of mints plus
   * JWKS route requests.
   */
  countSigningKeyLookups?: boolean;
  /**
   * How the plane reaches svc-a..svc-d: `local` (default, `localService`: HTTP-batch only);
   * `websocket` (`httpService` whose `fetch` and in-memory WebSockets reach the service); `native`
   * (`cloudflareServiceBinding` with `abilityRpc` calling the service's `connectAbility`, and the
   * echo abilities enabling `cloudflare-binding-rpc`). Every route records the request.
   */
  endpoints?: 'local' | 'websocket' | 'native';
}

/** A REST request of the fixture's callers. */
export interface RestRequestInit {
  /** A fixture bearer (`t-alice`...); none sends no `Authorization`. */
  bearer?: string;
  /** A JSON body (serialised) or raw text. */
  body?: unknown;
  /** Extra headers (`Content-Type` defaults to JSON when a body is given). */
  headers?: Record<string, string>;
}

/** The per-service scopes, and one grant per caller service on every target. */
const PUBLISHED_SCOPES: Record<FixtureServiceId, string[]> = {
  'svc-a': ['svc-a.read', 'svc-a.write', 'svc-a.internal'],
  'svc-b': ['svc-b.read'],
  'svc-c': ['svc-c.read'],
  'svc-d': ['svc-d.read'],
};
/** Granted but not published by svc-c: a grant that outlived its scope. */
export const RETIRED_SCOPE = 'svc-c.retired';
const GRANTED_CALLERS = ['svc-caller', 'svc-jwk', PLANE_ID, 'svc-robot'];

function grantsFor(id: FixtureServiceId) {
  return GRANTED_CALLERS.map((caller) => ({
    caller,
    scopes: id === 'svc-c' && caller === 'svc-caller'
      ? [...PUBLISHED_SCOPES[id], RETIRED_SCOPE]
      : PUBLISHED_SCOPES[id],
  }));
}

const JWS_IN_TEXT = /eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g;

function isCapabilityToken(jws: string): boolean {
  try {
    return decodeJws(jws).header.typ === CAPABILITY_TOKEN_TYP;
  } catch {
    return false;
  }
}

/** Waits `ms` milliseconds (a timer, so workerd's clock advances too). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A plane response read once: status, headers and the parsed JSON body. */
export interface ReadResponse {
  status: number;
  headers: Headers;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** Reads a response body as JSON (or `undefined` when it is not JSON). */
export async function readResponse(response: Response): Promise<ReadResponse> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, body };
}

/** Builds one deployment: services svc-a..svc-d, clients, and a first plane replica. */
export async function createPlaneDeployment(options: PlaneDeploymentOptions = {}) {
  const keys = await planeKeys();
  const stats: FixtureStats = createFixtureStats();
  const events: SvcLogEvent[] = [];
  const eventContexts: unknown[] = [];
  const log = (event: SvcLogEvent, context?: unknown) => {
    events.push(event);
    eventContexts.push(context);
  };
  const requests: ServiceRequestRecord[] = [];
  const stopped = new Set<string>();
  const discoveryDelays = new Map<string, number>();
  const discoveryAnswers = new Map<string, number>();
  const jwksRequests: string[] = [];
  const counters = { jwksFetches: 0, signingKeyLookups: 0, requesterFetches: 0 };
  const middleware: MiddlewareRecord = { runs: 0, invocations: [] };
  let openApiDocument: OpenApiDocumentLike | undefined;

  // Services reach the JWKS of whichever replica is active (the one "deployed" at the URL).
  let active: ControlPlane | undefined;
  const activeFetch = (request: Request, env?: unknown) => {
    if (active === undefined) throw new Error('no plane deployed');
    return active.fetch(request, env);
  };
  const serviceJwks = () =>
    jwksFromServiceBinding({
      fetch: (request: Request) => {
        counters.jwksFetches++;
        jwksRequests.push(request.url);
        return activeFetch(request);
      },
    }, { cacheTtlSeconds: options.jwksCacheTtlSeconds ?? 0.3 });
  const auth = () => ({ jwks: serviceJwks(), issuer: ISS });

  const built:
    & Partial<Record<DeployedServiceId, SvcService>>
    & Record<FixtureServiceId, SvcService> = {
      ...fixtureServices({ stats, auth, log, native: options.endpoints === 'native' }),
      ...(options.restService ? { [REST_SERVICE_ID]: restFixtureService(stats, auth()) } : {}),
    };

  /** A service's `fetch` as reached from anywhere: recorded, and refused while stopped. */
  const serviceFetch =
    (id: DeployedServiceId) =>
    async (request: Request, env?: unknown, ctx?: unknown): Promise<Response> => {
      if (stopped.has(id)) throw new TypeError('fetch failed: connection refused');
      const url = new URL(request.url);
      const tokens = request.method === 'POST' && request.body !== null
        ? ((await request.clone().text()).match(JWS_IN_TEXT) ?? []).filter(isCapabilityToken)
        : [];
      requests.push({
        service: id,
        method: request.method,
        path: url.pathname,
        url: request.url,
        headers: new Headers(request.headers),
        tokens,
      });
      const delay = url.pathname.startsWith('/.well-known/') ? discoveryDelays.get(id) : undefined;
      if (delay !== undefined) await sleep(delay);
      if (url.pathname.startsWith('/.well-known/')) {
        discoveryAnswers.set(id, (discoveryAnswers.get(id) ?? 0) + 1);
      }
      return built[id]!.fetch(request, env, ctx);
    };

  /** In-memory WebSockets to each service, one factory per service (its connections listed). */
  const sockets = Object.fromEntries(
    (['svc-a', 'svc-b', 'svc-c', 'svc-d'] as const).map((id) => [
      id,
      memoryWebSocketFactory(serviceFetch(id)),
    ]),
  ) as Record<FixtureServiceId, ReturnType<typeof memoryWebSocketFactory>>;
  /** Native sessions each service accepted, open until their caller closes them. */
  const nativeSessions = { opened: 0, closed: 0 };
  const nativeBinding = (id: FixtureServiceId): NativeAbilityBinding => ({
    async connectAbility(request: ConnectAbilityRequest) {
      if (stopped.has(id)) throw new TypeError('binding unavailable');
      requests.push({
        service: id,
        method: 'CONNECT',
        path: `/rpc/${request.abilityId}`,
        url: `native:${request.abilityId}`,
        headers: new Headers(),
        tokens: typeof request.token === 'string' ? [request.token] : [],
        native: request,
      });
      // The session ends when the caller closes its stream or the service stops reading it.
      let ended = false;
      const end = () => {
        if (!ended) nativeSessions.closed++;
        ended = true;
      };
      const reader = request.messages.getReader();
      const watched = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await reader.read().catch((error) => {
            end();
            throw error;
          });
          if (next.done) {
            end();
            controller.close();
          } else {
            controller.enqueue(next.value);
          }
        },
        cancel(reason) {
          end();
          return reader.cancel(reason);
        },
      }, { highWaterMark: 0 });
      const answer = await built[id].connectAbility({ ...request, messages: watched });
      if (answer.messages !== undefined) nativeSessions.opened++;
      return answer;
    },
  });

  // `websocketServices` is the older name of `endpoints: 'websocket'`.
  const endpointKind = options.endpoints ?? (options.websocketServices ? 'websocket' : 'local');
  const endpoints = (): ServiceEndpoint[] => [
    ...(['svc-a', 'svc-b', 'svc-c', 'svc-d'] as const).map((id) => {
      if (endpointKind === 'websocket') {
        return httpService({
          id,
          url: `https://${id}.internal`,
          fetch: (request) => serviceFetch(id)(request),
          createWebSocket: sockets[id].createWebSocket,
          grants: grantsFor(id),
        });
      }
      if (endpointKind === 'native') {
        return cloudflareServiceBinding({
          id,
          binding: { fetch: (request) => serviceFetch(id)(request) },
          abilityRpc: nativeBinding(id),
          createWebSocket: sockets[id].createWebSocket,
          grants: grantsFor(id),
        });
      }
      return localService({
        id,
        service: { fetch: serviceFetch(id), discovery: () => built[id].discovery() },
        grants: grantsFor(id),
      });
    }),
    ...(options.restService
      ? [localService({
        id: REST_SERVICE_ID,
        service: {
          fetch: serviceFetch(REST_SERVICE_ID),
          discovery: () => built[REST_SERVICE_ID]!.discovery(),
        },
        grants: REST_SERVICE_GRANTS,
      })]
      : []),
    ...(options.extraServices ?? []),
  ];

  const authenticators = (): CallerAuthenticator[] | undefined => {
    if (options.authenticateCaller === false) return undefined;
    if (options.authenticateCaller !== undefined) return options.authenticateCaller;
    return [
      hmacServiceClientAuth({
        clients: {
          hc1: { serviceId: 'svc-caller', secret: HMAC_SECRETS.hc1 },
          hc2: { serviceId: 'svc-other', secret: HMAC_SECRETS.hc2 },
        },
        log,
        ...options.hmac,
      }),
      jwkServiceClientAuth({
        clients: { jc1: { serviceId: 'svc-jwk', keys: [keys.K1.publicJwk, keys.K2.publicJwk] } },
        log,
        ...options.jwk,
      }),
    ];
  };

  /** Creates a plane replica (not yet the one services fetch their JWKS from). */
  const replica = (
    order: SigningKeyName[],
    overrides: Partial<ControlPlaneOptions> = {},
  ): ControlPlane => {
    const entries = order.map((name) => ({ kid: keys[name].kid, secret: keys[name].privateJwk }));
    const configured = authenticators();
    return createControlPlane({
      id: PLANE_ID,
      issuer: ISS,
      signingKeys: options.countSigningKeyLookups
        ? () => {
          counters.signingKeyLookups++;
          return entries;
        }
        : entries,
      ...(configured !== undefined ? { authenticateCaller: configured } : {}),
      services: endpoints(),
      discoveryCache: false,
      log,
      invocationMiddleware: fixtureInvocationMiddleware(middleware),
      openapi: FIXTURE_OPENAPI,
      ...options.plane,
      ...overrides,
    });
  };

  active = replica(options.signingOrder ?? ['k1', 'k2']);
  await active.ready();

  const requesterFetch = (request: Request) => {
    counters.requesterFetches++;
    return activeFetch(request);
  };

  const deployment = {
    keys,
    stats,
    events,
    eventContexts,
    requests,
    counters,
    /** URLs the services fetched from the plane (their JWKS source). */
    jwksRequests,
    services: built,
    /** The replica services currently fetch their JWKS from (and requesters talk to). */
    get plane(): ControlPlane {
      return active!;
    },
    /** Creates a replica with the same services and clients; `activate` it to deploy it. */
    replica,
    /** Makes `plane` the deployed replica (JWKS route and token endpoint of the fixture URL). */
    async activate(plane: ControlPlane): Promise<ControlPlane> {
      await plane.ready();
      active = plane;
      return plane;
    },
    /** A redeploy: a new replica with `order`, deployed at once. */
    redeploy(order: SigningKeyName[], overrides: Partial<ControlPlaneOptions> = {}) {
      return deployment.activate(replica(order, overrides));
    },
    /** A service stops answering (every request fails as a refused connection). */
    stop(id: DeployedServiceId) {
      stopped.add(id);
    },
    start(id: DeployedServiceId) {
      stopped.delete(id);
    },
    /** Every discovery answer of `id` takes `ms` longer (0 removes the delay). */
    slowDiscovery(id: DeployedServiceId, ms: number) {
      if (ms > 0) discoveryDelays.set(id, ms);
      else discoveryDelays.delete(id);
    },
    /** Discovery requests of `id` answered so far (after any {@link slowDiscovery} delay). */
    discoveryAnswers(id: DeployedServiceId): number {
      return discoveryAnswers.get(id) ?? 0;
    },
    /** Discovery requests `id` received. */
    discoveryRequests(id: DeployedServiceId) {
      return requests.filter((record) =>
        record.service === id && record.path.startsWith('/.well-known/')
      );
    },
    serviceFetch,
    /** The in-memory WebSockets the plane opened to each service (`endpoints: 'websocket'`). */
    sockets,
    /** Native binding sessions the services accepted and saw end (`endpoints: 'native'`). */
    nativeSessions,
    /** Requests an RPC route of `id` received (discovery requests excluded). */
    rpcRequests(id: DeployedServiceId) {
      return requests.filter((record) => record.service === id && record.path.startsWith('/rpc/'));
    },
    /** Capability tokens that reached `id` over HTTP-batch, in arrival order. */
    tokensAt(id: DeployedServiceId): string[] {
      return deployment.rpcRequests(id).flatMap((record) => record.tokens);
    },
    /** A fresh HMAC requester (own token cache) talking to the deployed replica. */
    hmacRequester(clientId: 'hc1' | 'hc2' = 'hc1', extra: { ttlSeconds?: number } = {}) {
      return controlPlaneHmacTokenRequester({
        clientId,
        controlPlaneUrl: PLANE_URL,
        clientSecret: HMAC_SECRETS[clientId],
        fetch: requesterFetch,
        ...extra,
      });
    },
    /** A fresh JWK requester for jc1 with `key` (default K1). */
    jwkRequester(key: FixtureKey = keys.K1, extra: { ttlSeconds?: number } = {}) {
      return controlPlaneJwkTokenRequester({
        clientId: 'jc1',
        controlPlaneUrl: PLANE_URL,
        keyId: key.kid,
        privateJwk: key.privateJwk,
        issuer: ISS,
        fetch: requesterFetch,
        ...extra,
      });
    },
    /** POSTs a token request through the deployed replica and reads the answer. */
    async send(request: Request, env?: unknown): Promise<ReadResponse> {
      return await readResponse(await activeFetch(request, env));
    },
    /** A caller-side session straight to a service (HTTP-batch or in-memory WebSocket). */
    session<Api = Record<string, (input: unknown) => Promise<unknown>>>(
      abilityId: string,
      init: {
        token?: string;
        requester?: ReturnType<typeof controlPlaneHmacTokenRequester>;
        scopes?: string[];
        callerServiceId?: string;
        proveTokenPossession?: ProofSigner;
        transport?: 'http-batch' | 'websocket';
        timeoutMs?: number;
      } = {},
    ) {
      const targetServiceId = abilityId.split('.')[0] as FixtureServiceId;
      const fixedToken = init.token;
      const requester = init.requester ?? deployment.hmacRequester();
      const transport = init.transport === 'websocket'
        ? websocketRpc(`ws://${targetServiceId}.internal/rpc/${abilityId}`, {
          createWebSocket: memoryWebSocketFactory(serviceFetch(targetServiceId)).createWebSocket,
        })
        : httpBatchRpc((request) => serviceFetch(targetServiceId)(request));
      return abilitySession<Api>({
        abilityId,
        callerServiceId: init.callerServiceId ?? 'svc-caller',
        targetServiceId,
        scopes: init.scopes ?? [`${targetServiceId}.read`],
        requestToken: fixedToken !== undefined
          ? Object.assign(async () => fixedToken, {
            proveTokenPossession: requester.proveTokenPossession,
          })
          : requester,
        transport,
        ...(init.proveTokenPossession !== undefined
          ? { proveTokenPossession: init.proveTokenPossession }
          : {}),
        ...(init.timeoutMs !== undefined ? { timeoutMs: init.timeoutMs } : {}),
      });
    },
    /** Handler-factory creations (`factories`) or method calls (`calls`) so far. */
    count(map: 'factories' | 'calls', key: string): number {
      return stats[map].get(key) ?? 0;
    },
    /** Events with this name, in order. */
    eventsNamed(name: string): SvcLogEvent[] {
      return events.filter((event) => event.event === name);
    },
    /** Runs of the fixture invocation middleware, and the `svcInvocation` of each. */
    middleware,
    /** The deployed plane's `/openapi.json`, read once. */
    async openapi(): Promise<OpenApiDocumentLike> {
      if (openApiDocument === undefined) {
        const response = await activeFetch(new Request(`${PLANE_URL}/openapi.json`));
        openApiDocument = await response.json() as OpenApiDocumentLike;
      }
      return openApiDocument;
    },
    /**
     * Sends a REST request to the deployed plane and reads the answer, which must be what the
     * plane's OpenAPI document declares for it (status, media type, body schema; an unknown
     * path a problem 404, another method a problem 405 with `Allow`).
     */
    async rest(method: string, path: string, init: RestRequestInit = {}): Promise<ReadResponse> {
      const headers = new Headers(init.headers);
      if (init.bearer !== undefined) headers.set('Authorization', `Bearer ${init.bearer}`);
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        if (!headers.has('Content-Type')) headers.set('Content-Type', 'application/json');
      }
      const read = await readResponse(
        await activeFetch(new Request(`${PLANE_URL}${path}`, { method, headers, body })),
      );
      assertReadResponseMatchesOpenApi(await deployment.openapi(), method, path, read);
      return read;
    },
    /** Reads a REST answer to `request` (sent by the test) and checks it against the document. */
    async checkedRest(request: Request): Promise<ReadResponse> {
      const url = new URL(request.url);
      const read = await readResponse(await activeFetch(request));
      assertReadResponseMatchesOpenApi(
        await deployment.openapi(),
        request.method,
        `${url.pathname}${url.search}`,
        read,
      );
      return read;
    },
  };
  return deployment;
}

/** One deployment built by {@link createPlaneDeployment}. */
export type PlaneDeployment = Awaited<ReturnType<typeof createPlaneDeployment>>;

/** A fake service: an endpoint whose discovery answer is whatever the test crafted. */
export function fakeService(
  id: string,
  discovery: unknown | (() => Response | Promise<Response>),
  grants = [{ caller: 'svc-caller', scopes: [`${id}.read`] }],
) {
  const received: string[] = [];
  const endpoint = localService({
    id,
    grants,
    service: fetchOnlyService((request: Request) => {
      received.push(new URL(request.url).pathname);
      if (typeof discovery === 'function') {
        return Promise.resolve((discovery as () => Response | Promise<Response>)());
      }
      return Promise.resolve(Response.json(discovery));
    }),
  });
  return { endpoint, received };
}

/** The discovery document of a fixture-like service `id` with one whoami ability. */
export async function discoveryDocumentOf(id: string): Promise<Record<string, unknown>> {
  const service = createService({
    id,
    title: `Fake ${id}`,
    version: '1.0.0',
    auth: { jwks: { keys: [] }, issuer: ISS },
    abilities: [whoamiOnlyAbility(createFixtureStats(), id)],
    logger: false,
  });
  const response = await service.fetch(
    new Request(`https://${id}.internal/.well-known/svc/service.json`),
  );
  return await response.json() as Record<string, unknown>;
}

/** The taxonomy fields a refusal must carry (any subset). */
export interface ExpectedRefusal {
  code?: string;
  status?: number;
  reason?: string;
  retryable?: boolean;
  name?: string;
}

/** Awaits a rejection and checks its taxonomy fields; returns the error for further checks. */
export async function assertRefusal(
  pending: Promise<unknown> | (() => unknown),
  expected: ExpectedRefusal,
  label = JSON.stringify(expected),
): Promise<Record<string, unknown>> {
  let caught: unknown = undefined;
  let threw = false;
  try {
    await (typeof pending === 'function' ? pending() : pending);
  } catch (error) {
    threw = true;
    caught = error;
  }
  if (!threw) throw new Error(`expected a refusal (${label}), but it succeeded`);
  const error = caught as Record<string, unknown>;
  for (const [field, value] of Object.entries(expected)) {
    if (error?.[field] !== value) {
      throw new Error(
        `${label}: expected ${field} ${JSON.stringify(value)}, got ${
          JSON.stringify(error?.[field])
        } (${String((error as { message?: unknown })?.message)})`,
      );
    }
  }
  return error;
}

/** Runs `work` while counting calls of the global `fetch` (nothing here should fetch). */
export async function countingGlobalFetch<T>(work: () => Promise<T>): Promise<[T, number]> {
  const original = globalThis.fetch;
  let calls = 0;
  globalThis.fetch = ((...args: Parameters<typeof fetch>) => {
    calls++;
    return original(...args);
  }) as typeof fetch;
  try {
    return [await work(), calls];
  } finally {
    globalThis.fetch = original;
  }
}
