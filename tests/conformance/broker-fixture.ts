// The checklist deployment with the broker mounted (`rpc: {}`) and a bearer invocation
// middleware naming the checklist's callers: t-alice (user, org-1, api_key), t-bob (user, no
// kind), t-robot (the service svc-robot). Callers reach the broker in-process: over HTTP-batch
// with an `Authorization` header, over in-memory WebSockets whose upgrade carries the credential
// in the env (a browser would send a cookie; the middleware reads either).
import type { MiddlewareHandler } from 'hono';
import { brokerSession } from '../../src/caller/broker-session.ts';
import type { ConnInfo } from '../../src/core/conn-info.ts';
import type { BrokerCaller } from '../../src/plane/broker-caller.ts';
import { memoryWebSocketFactory } from '../../src/testing/mod.ts';
import { createPlaneDeployment, type PlaneDeploymentOptions } from './plane-fixture.ts';

/** The broker's route in the fixture. */
export const BROKER_URL = 'https://plane.fixture.test/rpc';

/** The checklist's front-door credentials and the callers they name. */
export const BEARER_CALLERS: Record<string, BrokerCaller> = {
  't-alice': { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
  't-bob': { id: 'bob', kind: 'user' },
  't-robot': { id: 'svc-robot', kind: 'service' },
};

/** The connection info the middleware forwards for every caller: a loopback peer. */
export const LOOPBACK: ConnInfo = {
  remote: { address: '127.0.0.1', addressType: 'IPv4', port: 50_000, transport: 'tcp' },
};

/** The credential names of the fixture. */
export type BearerCredential = 't-alice' | 't-bob' | 't-robot' | 't-nobody';

/**
 * Names the caller from `Authorization: Bearer <credential>` (or, on a WebSocket upgrade, the
 * `bearer` the in-memory factory put in the env); a 401 with `WWW-Authenticate` otherwise.
 */
export const bearerInvocationMiddleware: MiddlewareHandler = async (c, next) => {
  const header = c.req.header('authorization');
  const credential = header?.startsWith('Bearer ')
    ? header.slice('Bearer '.length)
    : (c.env as { bearer?: string } | undefined)?.bearer;
  const caller = credential === undefined ? undefined : BEARER_CALLERS[credential];
  if (caller === undefined) {
    return c.json({ title: 'Unauthorized', status: 401 }, 401, {
      'WWW-Authenticate': 'Bearer realm="svcplane"',
    });
  }
  c.set('svcCaller' as never, caller as never);
  c.set('svcConnInfo' as never, LOOPBACK as never);
  await next();
};

/** A deployment whose plane mounts the broker behind the bearer middleware. */
export async function createBrokerDeployment(options: PlaneDeploymentOptions = {}) {
  const deployment = await createPlaneDeployment({
    ...options,
    plane: { rpc: {}, invocationMiddleware: bearerInvocationMiddleware, ...options.plane },
  });
  /** The broker's in-memory WebSockets per credential (their connections listed). */
  const callerSockets = new Map<string, ReturnType<typeof memoryWebSocketFactory>>();
  const socketsOf = (credential: BearerCredential) => {
    let factory = callerSockets.get(credential);
    if (factory === undefined) {
      factory = memoryWebSocketFactory(
        (request, env, ctx) => deployment.plane.fetch(request, env, ctx),
        { env: { bearer: credential } },
      );
      callerSockets.set(credential, factory);
    }
    return factory;
  };
  /** A fetch to the plane carrying `credential` as a bearer token. */
  const brokerFetch = (credential: BearerCredential) => (request: Request) => {
    const headers = new Headers(request.headers);
    headers.set('Authorization', `Bearer ${credential}`);
    return deployment.plane.fetch(new Request(request, { headers }));
  };
  return Object.assign(deployment, {
    brokerFetch,
    /** The in-memory WebSocket factory of `credential`'s broker sockets. */
    callerSockets: socketsOf,
    /** A typed broker session as `credential` over `transport`. */
    brokerSession<Api = Record<string, (input: unknown) => Promise<unknown>>>(
      credential: BearerCredential,
      init: {
        abilityId: string;
        scopes: string[];
        transport?: 'http-batch' | 'websocket';
        timeoutMs?: number;
        idempotencyKey?: string;
        requestId?: string;
      },
    ) {
      const { transport = 'http-batch', abilityId, ...rest } = init;
      return brokerSession<Api>({
        url: BROKER_URL,
        targetServiceId: abilityId.split('.')[0],
        abilityId,
        transport,
        ...(transport === 'http-batch'
          ? { fetch: brokerFetch(credential) }
          : { createWebSocket: socketsOf(credential).createWebSocket }),
        ...rest,
      });
    },
  });
}

/** One broker deployment. */
export type BrokerDeployment = Awaited<ReturnType<typeof createBrokerDeployment>>;
