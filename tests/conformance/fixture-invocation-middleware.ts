// The checklist's invocation middleware (§1.2) for the fixture plane: bearer credentials naming
// the broker callers t-alice, t-bob, t-robot and t-usersvc, t-nocaller (no caller named), and the
// middleware's own 401 for anything else. Each run is counted, with the svcInvocation it saw.
import type { MiddlewareHandler } from 'hono';
import type { BrokerCaller } from '../../src/plane/broker-caller.ts';
import type { SvcInvocation } from '../../src/plane/invocation-middleware.ts';

/**
 * The invocation-middleware credentials of the checklist (§1.2): `Authorization: Bearer <t>`.
 * `t-nocaller` calls `next()` without naming a caller; no (or an unknown) credential gets the
 * middleware's own 401 with `WWW-Authenticate: Bearer realm="fixture"`.
 */
export const FIXTURE_BEARERS: Readonly<Record<string, BrokerCaller>> = {
  't-alice': { id: 'alice', kind: 'user', orgId: 'org-1', principalKind: 'api_key' },
  't-bob': { id: 'bob', kind: 'user' },
  't-robot': { id: 'svc-robot', kind: 'service' },
  't-usersvc': { id: 'carol', kind: 'user', principalKind: 'service' },
};
/** The credential whose middleware run names no caller. */
export const NO_CALLER_BEARER = 't-nocaller';
/** The challenge of the fixture middleware's 401. */
export const FIXTURE_CHALLENGE = 'Bearer realm="fixture"';
/** The connection info the fixture middleware forwards (a loopback client). */
export const FIXTURE_CONN_INFO = {
  remote: { address: '127.0.0.1', addressType: 'IPv4', port: 50123, transport: 'tcp' },
} as const;

/** The `openapi` option of the fixture plane: the bearer authentication its middleware does. */
export const FIXTURE_OPENAPI = {
  security: [{ fixtureBearer: [] }],
  securitySchemes: { fixtureBearer: { type: 'http', scheme: 'bearer' } },
  cache: false as const,
};

/** What the fixture middleware saw: one entry per run, with the `svcInvocation` it was given. */
export interface MiddlewareRecord {
  runs: number;
  invocations: SvcInvocation[];
}

/** The checklist's invocation middleware (§1.2), counting its runs into `record`. */
export function fixtureInvocationMiddleware(record: MiddlewareRecord): MiddlewareHandler {
  return async (c, next) => {
    record.runs++;
    record.invocations.push(c.get('svcInvocation' as never) as SvcInvocation);
    const credential = /^Bearer (\S+)$/.exec(c.req.header('Authorization') ?? '')?.[1];
    const caller = credential === undefined ? undefined : FIXTURE_BEARERS[credential];
    if (caller === undefined && credential !== NO_CALLER_BEARER) {
      return Response.json({
        type: 'urn:svcplane:problem:capability_auth',
        title: 'Unauthorized',
        status: 401,
        detail: 'A bearer credential is required',
        code: 'capability_auth',
        retryable: false,
        reason: 'fixture_unauthenticated',
      }, {
        status: 401,
        headers: {
          'WWW-Authenticate': FIXTURE_CHALLENGE,
          'Content-Type': 'application/problem+json',
        },
      });
    }
    if (caller !== undefined) c.set('svcCaller' as never, caller as never);
    c.set('svcConnInfo' as never, FIXTURE_CONN_INFO as never);
    await next();
  };
}
