// Control-plane variants of the checklist deployment (§1.2), for the plane's own conformance
// tests. Unlike `createFixture`, a deployment here can run several plane replicas with the same
// keys in different orders, redeploy the plane while the services keep their (short) JWKS
// caches, stop any service, add fake services with crafted discovery documents, and record
// every request a service receives together with the capability tokens it carried.
import { CAPABILITY_TOKEN_TYP } from '../../src/core/capability-token.ts';
import { encodeBase64Url } from '../../src/core/base64url.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import type { CallerAuthenticator } from '../../src/plane/caller-auth.ts';
import {
  CAPABILITY_TOKEN_PATH,
  type ControlPlane,
  createControlPlane,
  JWKS_PATH,
} from '../../src/plane/control-plane.ts';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import { localService, type ServiceEndpoint } from '../../src/plane/endpoints.ts';
import { abilitySession, type ProofSigner } from '../../src/service/ability-session.ts';
import { jwksFromServiceBinding } from '../../src/service/jwks-sources.ts';
import { tokenHashForProof } from '../../src/service/proof-verify.ts';
import { createService } from '../../src/service/service.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../src/service/token-requesters.ts';
import {
  requestBodyHash,
  signCompactEs256,
  signHmacTokenRequest,
} from '../../src/service/token-request-signing.ts';
import { httpBatchRpc } from '../../src/service/transports/http-batch.ts';
import { websocketRpc } from '../../src/service/transports/websocket.ts';
import { memoryWebSocketFactory } from '../support/memory-websocket.ts';
import {
  createFixtureStats,
  echoAbility,
  type FixtureStats,
  internalAbility,
  otherAbility,
  privateAbility,
  whoamiOnlyAbility,
} from './fixture-abilities.ts';
import { type FixtureKey, generateFixtureKey, ISS, PLANE_ID, PLANE_URL } from './fixture.ts';

export { ISS, PLANE_ID, PLANE_URL };
export type { FixtureKey };

/** The token endpoint of the fixture plane. */
export const TOKEN_URL = `${PLANE_URL}${CAPABILITY_TOKEN_PATH}`;
/** The JWKS route of the fixture plane. */
export const JWKS_URL = `${PLANE_URL}${JWKS_PATH}`;
/** Shared secrets of the HMAC clients hc1 (svc-caller) and hc2 (svc-other). */
export const HMAC_SECRETS = {
  hc1: 'plane-hc1-secret-8c1f0e2d7a4b4c3e9f10',
  hc2: 'plane-hc2-secret-51d7a3b0c9e84f2a6d31',
} as const;

/** Plane signing keys a deployment can be configured with. */
export type SigningKeyName = 'k1' | 'k2' | 'k3';

/** The fixture's service ids. */
export type FixtureServiceId = 'svc-a' | 'svc-b' | 'svc-c' | 'svc-d';

/** The keys of one test file: plane keys k1..k3, attacker A, client keys K1, K2 (jc1). */
export interface PlaneKeys {
  k1: FixtureKey;
  k2: FixtureKey;
  k3: FixtureKey;
  attacker: FixtureKey;
  K1: FixtureKey;
  K2: FixtureKey;
}

let keysOfThisFile: Promise<PlaneKeys> | undefined;

/** Fresh keys, generated once per test file so that replicas of one file share them. */
export function planeKeys(): Promise<PlaneKeys> {
  keysOfThisFile ??= (async () => {
    const [k1, k2, k3, attacker, K1, K2] = await Promise.all([
      generateFixtureKey('k1'),
      generateFixtureKey('k2'),
      generateFixtureKey('k3'),
      generateFixtureKey('a1'),
      generateFixtureKey('jk1'),
      generateFixtureKey('jk2'),
    ]);
    return { k1, k2, k3, attacker, K1, K2 };
  })();
  return keysOfThisFile;
}

/** One request a fixture service received. */
export interface ServiceRequestRecord {
  service: string;
  method: string;
  path: string;
  url: string;
  headers: Headers;
  /** Capability tokens found in the request body (HTTP-batch `authenticate` arguments). */
  tokens: string[];
}

/** Options of {@link createPlaneDeployment}. */
export interface PlaneDeploymentOptions {
  /** Signing-key order of the first plane replica; default `['k1', 'k2']`. */
  signingOrder?: SigningKeyName[];
  /** Service JWKS cache TTL in seconds; default 0.3 (rotation tests wait for it to pass). */
  jwksCacheTtlSeconds?: number;
  /** Extra plane options (httpCache, ttlSeconds, timeout, discoveryCache...). */
  plane?: Partial<Omit<ControlPlaneOptions, 'signingKeys' | 'authenticateCaller'>>;
  /** Endpoints added to the fixture catalog (fake services). */
  extraServices?: ServiceEndpoint[];
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

/** The decoded header and claims of a compact JWS (no verification). */
export function decodeJws(token: string): {
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
} {
  const part = (segment: string) =>
    JSON.parse(new TextDecoder().decode(fromBase64Url(segment))) as Record<string, unknown>;
  const [header, claims] = token.split('.');
  return { header: part(header), claims: part(claims) };
}

/** Bytes from unpadded base64url. */
export function fromBase64Url(text: string): Uint8Array {
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (character) => character.charCodeAt(0));
}

function isCapabilityToken(jws: string): boolean {
  try {
    return decodeJws(jws).header.typ === CAPABILITY_TOKEN_TYP;
  } catch {
    return false;
  }
}

/** The harness's own RFC 7638 thumbprint of a P-256 public JWK (members in order, no spaces). */
export async function harnessThumbprint(jwk: JsonWebKey): Promise<string> {
  const canonical = `{"crv":"${jwk.crv}","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`;
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(canonical));
  return encodeBase64Url(new Uint8Array(digest));
}

/** Waits `ms` milliseconds (a timer, so workerd's clock advances too). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A standard token request body: hc1's service asking for `svc-a.read` on svc-a. */
export function tokenBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    callerServiceId: 'svc-caller',
    targetServiceId: 'svc-a',
    scopes: ['svc-a.read'],
    ...overrides,
  };
}

/** Options of {@link hmacTokenRequest}. */
export interface HmacTokenRequestOptions {
  clientId?: 'hc1' | 'hc2' | string;
  /** Secret to sign with; default the client's registered secret. */
  secret?: string;
  requestId?: string;
  timestampSeconds?: number;
  method?: string;
  url?: string;
  /** What is sent, when it differs from what was signed. */
  send?: { body?: string | Uint8Array; url?: string; method?: string };
  /** Header edits after signing: a string sets, `null` removes. */
  headers?: Record<string, string | null>;
}

/** A correctly HMAC-signed token request (then edited as the options say). */
export async function hmacTokenRequest(
  body: unknown,
  options: HmacTokenRequestOptions = {},
): Promise<Request> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const clientId = options.clientId ?? 'hc1';
  const url = options.url ?? TOKEN_URL;
  const method = options.method ?? 'POST';
  const signed = await signHmacTokenRequest({
    clientId,
    clientSecret: options.secret ?? HMAC_SECRETS[clientId as 'hc1'] ?? 'unregistered-secret',
    url,
    body: text,
    requestId: options.requestId ?? crypto.randomUUID(),
    method,
    ...(options.timestampSeconds !== undefined
      ? { timestampSeconds: options.timestampSeconds }
      : {}),
  });
  const headers = new Headers({ 'Content-Type': 'application/json', ...signed });
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value === null) headers.delete(name);
    else headers.set(name, value);
  }
  const sendMethod = options.send?.method ?? method;
  const sendBody = options.send?.body ?? text;
  return new Request(options.send?.url ?? url, {
    method: sendMethod,
    headers,
    ...(sendMethod === 'GET' || sendMethod === 'HEAD' ? {} : { body: sendBody as BodyInit }),
  });
}

/** Options of {@link jwkTokenRequest}. */
export interface JwkTokenRequestOptions {
  /** Key to sign with; default K1. */
  key?: FixtureKey;
  /** Header members replacing / added to `{ alg, kid, typ }` (`undefined` removes one). */
  header?: Record<string, unknown>;
  /** Claims replacing / added to the request-bound set (`undefined` removes one). */
  claims?: Record<string, unknown>;
  requestId?: string;
  /** Scheme word sent before the assertion; default `Svc-JWK`. */
  scheme?: string;
  send?: { body?: string; url?: string; method?: string; requestId?: string | null };
  /** A complete Authorization value, replacing the signed one. */
  authorization?: string;
}

async function importSigningKey(key: FixtureKey): Promise<CryptoKey> {
  const { kty, crv, x, y, d } = key.privateJwk;
  return await crypto.subtle.importKey(
    'jwk',
    { kty, crv, x, y, d },
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['sign'],
  );
}

/** Drops members whose value is `undefined` (how options remove a member). */
function defined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

/** A request-bound JWK caller assertion for jc1, with any member overridden. */
export async function jwkAssertion(
  bodyText: string,
  requestId: string,
  options: Pick<JwkTokenRequestOptions, 'key' | 'header' | 'claims'> & { url?: string } = {},
): Promise<string> {
  const key = options.key ?? (await planeKeys()).K1;
  const now = Math.floor(Date.now() / 1000);
  const url = new URL(options.url ?? TOKEN_URL);
  const header = defined({ alg: 'ES256', kid: key.kid, typ: 'svc-client+jwt', ...options.header });
  const claims = defined({
    iss: 'jc1',
    sub: 'jc1',
    aud: ISS,
    htm: 'POST',
    htu: `${url.pathname}${url.search}`,
    bh: await requestBodyHash(bodyText),
    rid: requestId,
    iat: now,
    exp: now + 60,
    jti: crypto.randomUUID(),
    ...options.claims,
  });
  return await signCompactEs256(header, claims, await importSigningKey(key));
}

/** A JWK-authenticated token request (jc1), with any part of it altered as the options say. */
export async function jwkTokenRequest(
  body: unknown,
  options: JwkTokenRequestOptions = {},
): Promise<Request> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const requestId = options.requestId ?? crypto.randomUUID();
  const assertion = await jwkAssertion(text, requestId, options);
  const headers = new Headers({
    'Content-Type': 'application/json',
    Authorization: options.authorization ?? `${options.scheme ?? 'Svc-JWK'} ${assertion}`,
  });
  const sentRequestId = options.send?.requestId === undefined ? requestId : options.send.requestId;
  if (sentRequestId !== null) headers.set('X-Request-Id', sentRequestId);
  const method = options.send?.method ?? 'POST';
  return new Request(options.send?.url ?? TOKEN_URL, {
    method,
    headers,
    ...(method === 'GET' ? {} : { body: options.send?.body ?? text }),
  });
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
  const jwksRequests: string[] = [];
  const counters = { jwksFetches: 0, signingKeyLookups: 0, requesterFetches: 0 };

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

  const built = {
    'svc-a': createService({
      id: 'svc-a',
      title: 'Service A',
      version: '1.0.0',
      auth: auth(),
      abilities: [
        echoAbility(stats),
        otherAbility(stats),
        internalAbility(stats),
        privateAbility(stats),
      ],
      logger: { log },
    }),
    'svc-b': createService({
      id: 'svc-b',
      title: 'Service B',
      version: '1.0.0',
      auth: auth(),
      ingress: { brokerServiceId: PLANE_ID },
      abilities: [whoamiOnlyAbility(stats, 'svc-b')],
      logger: { log },
    }),
    'svc-c': createService({
      id: 'svc-c',
      title: 'Service C',
      version: '1.0.0',
      auth: auth(),
      abilities: [whoamiOnlyAbility(stats, 'svc-c')],
      logger: { log },
    }),
    'svc-d': createService({
      id: 'svc-d',
      title: 'Service D',
      version: '1.0.0',
      auth: auth(),
      abilities: [whoamiOnlyAbility(stats, 'svc-d')],
      logger: { log },
    }),
  };

  /** A service's `fetch` as reached from anywhere: recorded, and refused while stopped. */
  const serviceFetch =
    (id: FixtureServiceId) =>
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
      return built[id].fetch(request, env, ctx);
    };

  const endpoints = (): ServiceEndpoint[] => [
    ...(['svc-a', 'svc-b', 'svc-c', 'svc-d'] as const).map((id) =>
      localService({ id, service: { fetch: serviceFetch(id) }, grants: grantsFor(id) })
    ),
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
    stop(id: FixtureServiceId) {
      stopped.add(id);
    },
    start(id: FixtureServiceId) {
      stopped.delete(id);
    },
    /** Every discovery answer of `id` takes `ms` longer (0 removes the delay). */
    slowDiscovery(id: FixtureServiceId, ms: number) {
      if (ms > 0) discoveryDelays.set(id, ms);
      else discoveryDelays.delete(id);
    },
    /** Discovery requests `id` received. */
    discoveryRequests(id: FixtureServiceId) {
      return requests.filter((record) =>
        record.service === id && record.path.startsWith('/.well-known/')
      );
    },
    serviceFetch,
    /** Requests an RPC route of `id` received (discovery requests excluded). */
    rpcRequests(id: FixtureServiceId) {
      return requests.filter((record) => record.service === id && record.path.startsWith('/rpc/'));
    },
    /** Capability tokens that reached `id` over HTTP-batch, in arrival order. */
    tokensAt(id: FixtureServiceId): string[] {
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
    service: {
      fetch(request: Request) {
        received.push(new URL(request.url).pathname);
        if (typeof discovery === 'function') {
          return Promise.resolve((discovery as () => Response | Promise<Response>)());
        }
        return Promise.resolve(Response.json(discovery));
      },
    },
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

/**
 * A capability token signed with a plane key (default k1) but built by the harness: the
 * baseline plain claims (svc-caller → svc-a, `svc-a.read` + `svc-a.internal`, spa service),
 * with `claims` merged over them (`undefined` removes a claim).
 */
export async function forgedToken(
  claims: Record<string, unknown> = {},
  options: { key?: FixtureKey; header?: Record<string, unknown> } = {},
): Promise<string> {
  const key = options.key ?? (await planeKeys()).k1;
  const now = Math.floor(Date.now() / 1000);
  return await signCompactEs256(
    defined({ alg: 'ES256', kid: key.kid, typ: CAPABILITY_TOKEN_TYP, ...options.header }),
    defined({
      iss: ISS,
      sub: 'svc-caller',
      aud: 'svc-a',
      scp: ['svc-a.read', 'svc-a.internal'],
      spa: 'service',
      jti: crypto.randomUUID(),
      iat: now - 5,
      nbf: now - 5,
      exp: now + 120,
      ...claims,
    }),
    await importSigningKey(key),
  );
}

/**
 * A proof of possession built by the harness (bypassing the shipped signer's local checks):
 * header `{ alg, typ, jwk: <public key of key> }`, claims `{ ath, aud, ab, iat, jti }`, each
 * member overridable (`undefined` removes one).
 */
export async function craftedProof(options: {
  token: string;
  key: FixtureKey;
  /** Signs with this key instead of `key` (whose public half stays in the header). */
  signWith?: FixtureKey;
  audience?: string;
  abilityId?: string;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}): Promise<string> {
  const { kty, crv, x, y } = options.key.publicJwk;
  return await signCompactEs256(
    defined({ alg: 'ES256', typ: 'svc-pop+jwt', jwk: { kty, crv, x, y }, ...options.header }),
    defined({
      ath: await tokenHashForProof(options.token),
      aud: options.audience ?? 'svc-a',
      ab: options.abilityId ?? 'svc-a.echo',
      iat: Math.floor(Date.now() / 1000),
      jti: crypto.randomUUID(),
      ...options.claims,
    }),
    await importSigningKey(options.signWith ?? options.key),
  );
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
