// The checklist's fixture deployment (§1.2), built in-process: a plane with fresh signing keys
// k1/k2, services svc-a (no ingress), svc-b (ingress), svc-c (second audience) and svc-d (can be
// stopped), HMAC clients hc1/hc2 and the JWK client jc1 with keys K1/K2. Services verify tokens
// against the plane's JWKS through a binding with a short cache TTL.
import assert from 'node:assert/strict';
import { svcErrorInfo } from '../../src/core/errors.ts';
import { createControlPlane } from '../../src/plane/control-plane.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { localService } from '../../src/plane/endpoints.ts';
import { createService } from '../../src/service/service.ts';
import { jwksFromServiceBinding } from '../../src/service/jwks-sources.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../src/caller/token-requesters.ts';
import {
  abilitySession,
  type ProofSigner,
  type TokenRequester,
} from '../../src/caller/ability-session.ts';
import { httpBatchRpc } from '../../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../../src/caller/transports/websocket.ts';
import type { RpcTransportFactory } from '../../src/caller/transports/outbound-metadata.ts';
import type { ServiceOptions, SvcService } from '../../src/service/mod.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
import type { ControlPlaneOptions } from '../../src/plane/control-plane-options.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { signedToken } from '../support/forge.ts';
import { recordSent } from '../support/raw-rpc-socket.ts';
import {
  createFixtureStats,
  echoAbility,
  type FixtureStats,
  internalAbility,
  otherAbility,
  privateAbility,
  whoamiOnlyAbility,
} from './fixture-abilities.ts';

export const PLANE_ID = 'svc-plane';
export const ISS = 'https://plane.fixture.test';
export const PLANE_URL = 'https://plane.fixture.test';

/** A P-256 key pair as JWKs, with a kid. */
export interface FixtureKey {
  kid: string;
  privateJwk: JsonWebKey;
  publicJwk: JsonWebKey;
}

export async function generateFixtureKey(kid: string): Promise<FixtureKey> {
  const pair = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ]) as CryptoKeyPair;
  const exported = await crypto.subtle.exportKey('jwk', pair.privateKey);
  // Only the key members: runtimes differ in the extras (key_ops, ext) they export.
  const publicJwk = { kty: exported.kty, crv: exported.crv, x: exported.x, y: exported.y, kid };
  return { kid, privateJwk: { ...publicJwk, d: exported.d }, publicJwk };
}

export interface FixtureOptions {
  /** Signing key order of the plane; default [k1, k2]. */
  signingOrder?: ('k1' | 'k2')[];
  /** Service JWKS cache TTL; default 2 s (the checklist's JWKS-04 value). */
  jwksCacheTtlSeconds?: number;
  /** The plane's discovery cache; default `false` (every resolution is fresh). */
  discoveryCache?: ControlPlaneOptions['discoveryCache'];
  /** When set, the plane's `services(context)` takes this long to answer (a slow catalog). */
  servicesDelayMs?: number;
}

/** The services of the deployment, by id. */
export type FixtureServiceId = 'svc-a' | 'svc-b' | 'svc-c' | 'svc-d';

const HC1_SECRET = 'hc1-secret-0123456789abcdef0123456789';
const HC2_SECRET = 'hc2-secret-0123456789abcdef0123456789';

/**
 * The checklist's four services (§1.2): svc-a with its echo, other, internal and private
 * abilities, svc-b behind ingress, svc-c and svc-d with `whoami` only. Shared by every fixture.
 */
export function fixtureServices(init: {
  stats: FixtureStats;
  auth: () => ServiceOptions['auth'];
  log: (event: SvcLogEvent) => void;
  /** Enable `cloudflare-binding-rpc` too on svc-a.echo and the `<id>.echo` of svc-b..svc-d. */
  native?: boolean;
}): Record<FixtureServiceId, SvcService> {
  const { stats, auth, log } = init;
  const native = init.native === true;
  const whoamiService = (id: 'svc-b' | 'svc-c' | 'svc-d', title: string, ingress: boolean) =>
    createService({
      id,
      title,
      version: '1.0.0',
      auth: auth(),
      ...(ingress ? { ingress: { brokerServiceId: PLANE_ID } } : {}),
      abilities: [whoamiOnlyAbility(stats, id, { native })],
      logger: { log },
    });
  return {
    'svc-a': createService({
      id: 'svc-a',
      title: 'Service A',
      version: '1.0.0',
      auth: auth(),
      abilities: [
        echoAbility(stats, 'svc-a', { native }),
        otherAbility(stats),
        internalAbility(stats),
        privateAbility(stats),
      ],
      logger: { log },
    }),
    'svc-b': whoamiService('svc-b', 'Service B', true),
    'svc-c': whoamiService('svc-c', 'Service C', false),
    'svc-d': whoamiService('svc-d', 'Service D', false),
  };
}

/** Builds the whole deployment. Everything runs in-process through `fetch` functions. */
export async function createFixture(options: FixtureOptions = {}) {
  const stats: FixtureStats = createFixtureStats();
  const events: SvcLogEvent[] = [];
  const log = (event: SvcLogEvent) => void events.push(event);
  const [k1, k2, attacker, K1, K2] = await Promise.all([
    generateFixtureKey('k1'),
    generateFixtureKey('k2'),
    generateFixtureKey('a1'),
    generateFixtureKey('jk1'),
    generateFixtureKey('jk2'),
  ]);
  const signingKeys = { k1, k2 };
  const order = options.signingOrder ?? ['k1', 'k2'];
  let svcDStopped = false;

  // Services reach the plane's JWKS through a binding; the plane is created below.
  let planeFetch: (request: Request) => Promise<Response> = () => {
    throw new Error('plane not created yet');
  };
  const jwks = () =>
    jwksFromServiceBinding({ fetch: (request: Request) => planeFetch(request) }, {
      cacheTtlSeconds: options.jwksCacheTtlSeconds ?? 2,
    });
  const auth = () => ({ jwks: jwks(), issuer: ISS });

  const { 'svc-a': svcA, 'svc-b': svcB, 'svc-c': svcC, 'svc-d': svcD } = fixtureServices({
    stats,
    auth,
    log,
  });
  // The plane reaches each service through the live table, so a test can replace one (a
  // redeploy) while the plane keeps whatever catalog it cached.
  const live: Record<FixtureServiceId, SvcService> = {
    'svc-a': svcA,
    'svc-b': svcB,
    'svc-c': svcC,
    'svc-d': svcD,
  };
  const behindPlane = (id: FixtureServiceId) => ({
    fetch: (request: Request, env?: unknown, ctx?: unknown) => live[id].fetch(request, env, ctx),
    discovery: () => live[id].discovery(),
  });
  const stoppable = {
    fetch: (request: Request, env?: unknown, ctx?: unknown) =>
      svcDStopped
        ? Promise.reject(new TypeError('fetch failed: connection refused'))
        : live['svc-d'].fetch(request, env, ctx),
    discovery: () => live['svc-d'].discovery(),
  };

  const allScopes = {
    'svc-a': ['svc-a.read', 'svc-a.write', 'svc-a.internal'],
    'svc-b': ['svc-b.read'],
    'svc-c': ['svc-c.read'],
    'svc-d': ['svc-d.read'],
  };
  const grantsFor = (id: keyof typeof allScopes) =>
    ['svc-caller', 'svc-jwk', PLANE_ID, 'svc-robot'].map((caller) => ({
      caller,
      scopes: allScopes[id],
    }));

  const endpoints = [
    localService({ id: 'svc-a', service: behindPlane('svc-a'), grants: grantsFor('svc-a') }),
    localService({ id: 'svc-b', service: behindPlane('svc-b'), grants: grantsFor('svc-b') }),
    localService({ id: 'svc-c', service: behindPlane('svc-c'), grants: grantsFor('svc-c') }),
    localService({ id: 'svc-d', service: stoppable, grants: grantsFor('svc-d') }),
  ];
  const plane = createControlPlane({
    id: PLANE_ID,
    issuer: ISS,
    signingKeys: order.map((name) => ({
      kid: signingKeys[name].kid,
      secret: signingKeys[name].privateJwk,
    })),
    authenticateCaller: [
      hmacServiceClientAuth({
        clients: {
          hc1: { serviceId: 'svc-caller', secret: HC1_SECRET },
          hc2: { serviceId: 'svc-other', secret: HC2_SECRET },
        },
        log,
      }),
      jwkServiceClientAuth({
        clients: { jc1: { serviceId: 'svc-jwk', keys: [K1.publicJwk, K2.publicJwk] } },
        log,
      }),
    ],
    services: options.servicesDelayMs === undefined
      ? endpoints
      : () =>
        new Promise((resolve) => setTimeout(() => resolve(endpoints), options.servicesDelayMs)),
    discoveryCache: options.discoveryCache ?? false,
    log,
  });
  planeFetch = (request) => plane.fetch(request);
  await plane.ready();

  const services = live;
  const k1SigningKey = await crypto.subtle.importKey(
    'jwk',
    k1.privateJwk,
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['sign'],
  );
  const hc1 = controlPlaneHmacTokenRequester({
    clientId: 'hc1',
    controlPlaneUrl: PLANE_URL,
    clientSecret: HC1_SECRET,
    fetch: planeFetch,
  });
  const jc1 = (key: FixtureKey = K1) =>
    controlPlaneJwkTokenRequester({
      clientId: 'jc1',
      controlPlaneUrl: PLANE_URL,
      keyId: key.kid,
      privateJwk: key.privateJwk,
      issuer: ISS,
      fetch: planeFetch,
    });

  return {
    plane,
    services,
    stats,
    events,
    keys: { k1, k2, attacker, K1, K2 },
    secrets: { hc1: HC1_SECRET, hc2: HC2_SECRET },
    requesters: { hc1, jc1 },
    stopSvcD() {
      svcDStopped = true;
    },
    /** The in-process `fetch` of a service, for HTTP-batch sessions. */
    serviceFetch(id: keyof typeof services) {
      return (request: Request) => services[id].fetch(request);
    },
    /** A caller-side session to an ability over in-process HTTP-batch. */
    session<Api = Record<string, (input: unknown) => Promise<unknown>>>(
      abilityId: string,
      init: {
        token?: string;
        requester?: TokenRequester;
        /** Caller transport; default in-process HTTP-batch to the target's `fetch`. */
        transport?: RpcTransportFactory;
        proveTokenPossession?: ProofSigner;
        /** Serialised connection info to forward (what only the plane normally sends). */
        connInfo?: string;
        scopes?: string[];
        callerServiceId?: string;
        timeoutMs?: number;
        idempotencyKey?: string;
        requestId?: string;
      } = {},
    ) {
      const targetServiceId = abilityId.split('.')[0] as keyof typeof services;
      const fixedToken = init.token;
      const requester = init.requester ?? hc1;
      return abilitySession<Api>({
        abilityId,
        callerServiceId: init.callerServiceId ?? 'svc-caller',
        targetServiceId,
        scopes: init.scopes ?? [`${targetServiceId}.read`],
        requestToken: fixedToken !== undefined ? async () => fixedToken : requester,
        transport: init.transport ??
          httpBatchRpc((request) => services[targetServiceId].fetch(request)),
        ...(init.proveTokenPossession !== undefined
          ? { proveTokenPossession: init.proveTokenPossession }
          : {}),
        ...(init.connInfo !== undefined ? { connInfo: init.connInfo } : {}),
        ...(init.timeoutMs !== undefined ? { timeoutMs: init.timeoutMs } : {}),
        ...(init.idempotencyKey !== undefined ? { idempotencyKey: init.idempotencyKey } : {}),
        ...(init.requestId !== undefined ? { requestId: init.requestId } : {}),
      });
    },
    count(map: 'factories' | 'calls', key: string) {
      return stats[map].get(key) ?? 0;
    },
    /**
     * An in-memory WebSocket caller transport to an ability of a fixture service (the upgrade
     * goes through the service's real `fetch`). `query` adds raw parameters to the upgrade URL
     * (as a foreign caller would write them); `connections` records every connection opened,
     * `frames` every message the service sent, `sent` every message the caller handed its
     * socket, and `upgrades` every upgrade response.
     */
    webSocket(abilityId: string, options: { query?: Record<string, string> } = {}) {
      const targetServiceId = abilityId.split('.')[0] as FixtureServiceId;
      const frames: string[] = [];
      const sent: unknown[] = [];
      const upgrades: Response[] = [];
      const sockets = memoryWebSocketFactory(async (request, env) => {
        const response = await services[targetServiceId].fetch(request, env);
        upgrades.push(response);
        return response;
      });
      const url = new URL(`wss://${targetServiceId}.fixture.test/rpc/${abilityId}`);
      for (const [name, value] of Object.entries(options.query ?? {})) {
        url.searchParams.set(name, value);
      }
      const transport = websocketRpc(url, {
        createWebSocket: (finalUrl) => {
          const socket = sockets.createWebSocket(finalUrl);
          socket.addEventListener('message', (event) => void frames.push(String(event.data)));
          recordSent(socket, sent);
          return socket;
        },
      });
      return { transport, connections: sockets.connections, frames, sent, upgrades };
    },
    /**
     * An in-process HTTP-batch caller transport to a fixture service that sets `headers` raw on
     * every batch (values the caller-side filters would never send) and records each exchange
     * with the response body as bytes on the wire.
     */
    httpBatch(
      targetServiceId: FixtureServiceId,
      options: { headers?: Record<string, string> } = {},
    ) {
      const exchanges: { request: Request; response: Response; body: string }[] = [];
      const transport = httpBatchRpc(async (request) => {
        const headers = new Headers(request.headers);
        for (const [name, value] of Object.entries(options.headers ?? {})) {
          headers.set(name, value);
        }
        const sent = new Request(request.url, {
          method: request.method,
          headers,
          body: await request.text(),
        });
        const response = await services[targetServiceId].fetch(sent.clone());
        const body = await response.clone().text();
        exchanges.push({ request: sent, response, body });
        return response;
      });
      return { transport, exchanges };
    },
    /** Claim set B of the checklist with this deployment's issuer, plus `overrides`. */
    baselineClaims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
      const now = Math.floor(Date.now() / 1000);
      return {
        iss: ISS,
        sub: 'svc-caller',
        aud: 'svc-a',
        scp: ['svc-a.read'],
        spa: 'service',
        jti: crypto.randomUUID(),
        iat: now - 5,
        nbf: now - 5,
        exp: now + 120,
        ...overrides,
      };
    },
    /** A token the harness signs with k1 (header as the plane's: ES256, kid k1, typ). */
    forgeToken(claims: Record<string, unknown>): Promise<string> {
      return signedToken(k1SigningKey, claims);
    },
    /** Creates a service that verifies against this plane and logs into `events`. */
    createService(
      options: Omit<ServiceOptions, 'auth' | 'title' | 'version'> & Partial<ServiceOptions>,
    ): SvcService {
      return createService({
        title: options.id,
        version: '1.0.0',
        auth: auth(),
        logger: { log },
        ...options,
      });
    },
    /** A k1-signed service-class token for `audience` carrying `scopes` (claims B otherwise). */
    tokenFor(
      audience: FixtureServiceId,
      scopes: string[],
      overrides: Record<string, unknown> = {},
    ): Promise<string> {
      return signedToken(
        k1SigningKey,
        this.baselineClaims({ aud: audience, scp: scopes, ...overrides }),
      );
    },
    /**
     * Redeploys fixture service `id` with these abilities (and options), verifying against this
     * plane; returns the new service.
     */
    deploy(
      id: FixtureServiceId,
      abilities: ServiceOptions['abilities'],
      options: Partial<ServiceOptions> = {},
    ): SvcService {
      const service = this.createService({ id, abilities, ...options });
      live[id] = service;
      return service;
    },
    /** Replaces a service behind the plane and the fixture's direct routes (a redeploy). */
    replaceService(id: FixtureServiceId, service: SvcService) {
      live[id] = service;
    },
  };
}

export type Fixture = Awaited<ReturnType<typeof createFixture>>;

/** The taxonomy fields a refusal must carry. */
export interface ExpectedRefusal {
  code: string;
  status: number;
  retryable?: boolean;
  reason?: string;
}

/**
 * Awaits a call that must be refused and checks the received error's taxonomy fields (read
 * with `svcErrorInfo`, as any caller would). Returns the error for further checks.
 */
export async function assertRefusal(
  call: Promise<unknown>,
  expected: ExpectedRefusal,
  label = `${expected.code}/${expected.status}`,
): Promise<Error> {
  let caught: unknown;
  await assert.rejects(call, (error: unknown) => {
    caught = error;
    return true;
  }, `${label}: expected a refusal`);
  assert.ok(caught instanceof Error, `${label}: expected an Error, got ${String(caught)}`);
  const info = svcErrorInfo(caught);
  assert.equal(info.code, expected.code, `${label}: code (${caught.message})`);
  assert.equal(info.status, expected.status, `${label}: status (${caught.message})`);
  if (expected.retryable !== undefined) {
    assert.equal(info.retryable, expected.retryable, `${label}: retryable`);
  }
  if (expected.reason !== undefined) assert.equal(info.reason, expected.reason, `${label}: reason`);
  return caught;
}
