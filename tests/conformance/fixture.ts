// The checklist's fixture deployment (§1.2), built in-process: a plane with fresh signing keys
// k1/k2, services svc-a (no ingress), svc-b (ingress), svc-c (second audience) and svc-d (can be
// stopped), HMAC clients hc1/hc2 and the JWK client jc1 with keys K1/K2. Services verify tokens
// against the plane's JWKS through a binding with a short cache TTL.
import { createControlPlane } from '../../src/plane/control-plane.ts';
import { hmacServiceClientAuth } from '../../src/plane/caller-auth-hmac.ts';
import { jwkServiceClientAuth } from '../../src/plane/caller-auth-jwk.ts';
import { localService } from '../../src/plane/endpoints.ts';
import { createService } from '../../src/service/service.ts';
import { jwksFromServiceBinding } from '../../src/service/jwks-sources.ts';
import {
  controlPlaneHmacTokenRequester,
  controlPlaneJwkTokenRequester,
} from '../../src/service/token-requesters.ts';
import { abilitySession } from '../../src/service/ability-session.ts';
import { httpBatchRpc } from '../../src/service/transports/http-batch.ts';
import type { SvcLogEvent } from '../../src/core/logging.ts';
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
}

const HC1_SECRET = 'hc1-secret-0123456789abcdef0123456789';
const HC2_SECRET = 'hc2-secret-0123456789abcdef0123456789';

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

  const svcA = createService({
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
  });
  const svcB = createService({
    id: 'svc-b',
    title: 'Service B',
    version: '1.0.0',
    auth: auth(),
    ingress: { brokerServiceId: PLANE_ID },
    abilities: [whoamiOnlyAbility(stats, 'svc-b')],
    logger: { log },
  });
  const svcC = createService({
    id: 'svc-c',
    title: 'Service C',
    version: '1.0.0',
    auth: auth(),
    abilities: [whoamiOnlyAbility(stats, 'svc-c')],
    logger: { log },
  });
  const svcD = createService({
    id: 'svc-d',
    title: 'Service D',
    version: '1.0.0',
    auth: auth(),
    abilities: [whoamiOnlyAbility(stats, 'svc-d')],
    logger: { log },
  });
  const stoppable = {
    fetch: (request: Request, env?: unknown, ctx?: unknown) =>
      svcDStopped
        ? Promise.reject(new TypeError('fetch failed: connection refused'))
        : svcD.fetch(request, env, ctx),
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
    services: [
      localService({ id: 'svc-a', service: svcA, grants: grantsFor('svc-a') }),
      localService({ id: 'svc-b', service: svcB, grants: grantsFor('svc-b') }),
      localService({ id: 'svc-c', service: svcC, grants: grantsFor('svc-c') }),
      localService({ id: 'svc-d', service: stoppable, grants: grantsFor('svc-d') }),
    ],
    discoveryCache: false,
    log,
  });
  planeFetch = (request) => plane.fetch(request);
  await plane.ready();

  const services = { 'svc-a': svcA, 'svc-b': svcB, 'svc-c': svcC, 'svc-d': svcD };
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
      const service = services[id];
      return (request: Request) => service.fetch(request);
    },
    /** A caller-side session to an ability over in-process HTTP-batch. */
    session<Api = Record<string, (input: unknown) => Promise<unknown>>>(
      abilityId: string,
      init: {
        token?: string;
        requester?: ReturnType<typeof controlPlaneHmacTokenRequester>;
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
        transport: httpBatchRpc((request) => services[targetServiceId].fetch(request)),
        ...(init.timeoutMs !== undefined ? { timeoutMs: init.timeoutMs } : {}),
        ...(init.idempotencyKey !== undefined ? { idempotencyKey: init.idempotencyKey } : {}),
        ...(init.requestId !== undefined ? { requestId: init.requestId } : {}),
      });
    },
    count(map: 'factories' | 'calls', key: string) {
      return stats[map].get(key) ?? 0;
    },
  };
}

export type Fixture = Awaited<ReturnType<typeof createFixture>>;
