/**
 * `createControlPlane`: the signing authority, the JWKS, the catalog, the token endpoint, the
 * OpenAPI document and the in-process typed session, as one pure `fetch`.
 *
 * @module
 */
import { Hono } from 'hono';
import type { CapabilityPublicJwk } from '../core/capability-key-set.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import { httpCacheHeaders } from '../core/http-cache.ts';
import { createEventLog } from '../core/logging.ts';
import {
  acceptRequestId,
  generateRequestId,
  SVC_REQUEST_ID_HEADER,
  SVC_REQUEST_ID_QUERY_PARAM,
} from '../core/request-id.ts';
import type { AbilitySession } from '../caller/ability-session.ts';
import { contextRequestId, installRequestIdAndProblemJson } from '../service/problem-json-app.ts';
import type { AuthenticatedCaller } from './caller-auth.ts';
import { createCatalog } from './catalog.ts';
import { type ControlPlaneOptions, resolveControlPlaneOptions } from './control-plane-options.ts';
import { createInProcessSessions, type InProcessSessionOptions } from './in-process-session.ts';
import { createInvocation, type FrontDoorDependencies } from './invocation.ts';
import { mountMcpEndpoint } from './mcp/mount.ts';
import { createInvocationMiddlewareRunner } from './invocation-middleware.ts';
import { mountBroker } from './broker/mount-broker.ts';
import { mountRestFacade } from './rest/rest-facade.ts';
import {
  createIssuer,
  type IssueCapabilityTokenOptions,
  type IssuedCapabilityToken,
} from './issuer.ts';
import { resolveDiscoveryCaches } from './registry-cache.ts';
import { mountOpenApi, OPENAPI_PATH } from './rest/openapi-route.ts';
import { mountReference, referenceRoutePaths } from './reference/mount-reference.ts';
import { planeRequestFailed } from './request-failure.ts';
import {
  checkSigningKeyEntries,
  type SigningAuthority,
  signingAuthorityFromOption,
} from './signing-keys.ts';
import {
  createTokenEndpoint,
  type TokenIssueContext,
  type TokenRequestBody,
} from './token-endpoint.ts';

/** Where the control plane publishes its JWKS. */
export const JWKS_PATH = '/.well-known/svc/jwks.json';
/** Where callers request capability tokens. */
export const CAPABILITY_TOKEN_PATH = '/.well-known/svc/capability-token';

/** Where the MCP endpoint is served. */
export const MCP_PATH = '/mcp';
/** The default path of the public RPC broker. */
export const DEFAULT_RPC_PATH = '/rpc';

/**
 * The plane's own routes, whatever is configured: no REST route may shadow one (a REST
 * projection there is refused when the route table is built).
 */
const RESERVED_PLANE_PATHS: readonly string[] = [
  JWKS_PATH,
  CAPABILITY_TOKEN_PATH,
  OPENAPI_PATH,
  MCP_PATH,
  DEFAULT_RPC_PATH,
];

/** What `issueCapabilityTokenForCaller` takes: an authenticated service caller, never a subject. */
export interface IssueForCallerOptions {
  /**
   * The caller as an `authenticateCaller` authenticator admitted it: its `serviceId` becomes the
   * token's `sub`, and a JWK caller's `confirmationJkt` its `cnf.jkt`.
   */
  caller: AuthenticatedCaller;
  /** The service the token is for (`aud`); it must be in the plane's catalog. */
  targetServiceId: string;
  /**
   * Scopes asked for (at least one): each must be published by the target and granted to the
   * caller by the target's `grants`.
   */
  scopes: readonly string[];
  /** When given, the ability must exist on the target. */
  abilityId?: string;
  /**
   * Lifetime in seconds (a positive integer). Default, and ceiling: the plane's `ttlSeconds`
   * (`DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS`, 120, unless set).
   */
  ttlSeconds?: number;
  /** Runtime context handed to `services(context)` and `signingKeys(env)` (its `env`, if any). */
  context?: unknown;
  /** Propagated to the target's discovery request and log events. */
  requestId?: string;
}

/** The control plane returned by {@link createControlPlane}. */
export interface ControlPlane {
  /**
   * The Hono app behind `fetch` (JWKS, token endpoint, OpenAPI document), for mounting inside
   * a larger app.
   */
  readonly app: Hono;
  /**
   * Serves the plane's routes: `GET /.well-known/svc/jwks.json`,
   * `POST /.well-known/svc/capability-token` and `GET /openapi.json`. `env` holds the runtime's bindings (read by a
   * `signingKeys(env)` function); `ctx` is the runtime's execution context, passed through.
   */
  fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response>;
  /**
   * The JWKS this plane publishes: every configured key, public members only, in configuration
   * order. `env` is handed to a `signingKeys(env)` function; a static list ignores it.
   */
  jwks(env?: unknown): Promise<{ keys: CapabilityPublicJwk[] }>;
  /**
   * Mints a non-brokered token for trusted plane code, after the full grant check. An
   * ingress-protected target refuses such a token: use `issueBrokeredCapabilityToken` there.
   * Rejects with `CapabilityAuthError` 403 when the catalog, the grants or the request refuse it
   * (`unknown_target`, `unknown_scope`, `grant_denied`, `unknown_ability`, `scopes_required`,
   * `invalid_ttl`), `SvcInternalError` 500 when the target or the catalog cannot be resolved
   * (`target_unreachable`, `catalog_unavailable`), `SvcConfigurationError` for malformed options.
   */
  issueCapabilityToken(request: IssueCapabilityTokenOptions): Promise<IssuedCapabilityToken>;
  /**
   * As {@link ControlPlane.issueCapabilityToken}, adding the signed `spb` claim (this plane's
   * id) that ingress-protected services require.
   */
  issueBrokeredCapabilityToken(
    request: IssueCapabilityTokenOptions,
  ): Promise<IssuedCapabilityToken>;
  /**
   * Mints a service-class token (`spa: 'service'`) for a caller the plane authenticated, as the
   * token endpoint does. A `subject` is refused with 403 `subject_not_allowed`; otherwise it
   * rejects like {@link ControlPlane.issueCapabilityToken}.
   */
  issueCapabilityTokenForCaller(request: IssueForCallerOptions): Promise<IssuedCapabilityToken>;
  /**
   * Opens a typed, disposable session with one ability, as this plane: `caller.kind: 'user'`
   * mints delegated tokens, `'service'` service-class tokens, no caller plane-class tokens under
   * the plane's id; a target advertising ingress gets brokered tokens. `bindings` is the runtime
   * environment (or request context) handed to `services(context)` and `signingKeys(env)`. Not
   * an authentication boundary: authenticate the principal first.
   */
  abilitySession<Api = Record<string, (input: unknown) => unknown>>(
    options: InProcessSessionOptions,
    bindings?: unknown,
  ): AbilitySession<Api>;
  /**
   * Resolves once a static `signingKeys` list is imported (at once for a function of the
   * environment, imported on first use); rejects when a static key is unusable.
   */
  ready(): Promise<void>;
}

/** Every key of {@link IssueForCallerOptions}. */
const ISSUE_FOR_CALLER_OPTIONS: readonly string[] = [
  'caller',
  'targetServiceId',
  'scopes',
  'abilityId',
  'ttlSeconds',
  'context',
  'requestId',
];

/**
 * Creates a control plane. Configuration errors (a duplicate signing key id, a malformed option,
 * invalid limits) are thrown here, before anything is served.
 */
export function createControlPlane(options: ControlPlaneOptions): ControlPlane {
  const resolved = resolveControlPlaneOptions(options);
  const log = createEventLog(options.log, 'createControlPlane: `log`');
  const authorityFor = (env: unknown): Promise<SigningAuthority> =>
    signingAuthorityFromOption(options.signingKeys, env);
  // A static key list is checked now (a duplicate kid refuses to start) and imported once.
  if (Array.isArray(options.signingKeys)) checkSigningKeyEntries(options.signingKeys);
  const staticAuthority = Array.isArray(options.signingKeys) ? authorityFor(undefined) : undefined;
  // Kept once imported, so a mint reads it without a promise.
  let importedAuthority: SigningAuthority | undefined;
  staticAuthority?.then((authority) => (importedAuthority = authority), () => {});
  const catalog = createCatalog({
    services: options.services,
    caches: resolveDiscoveryCaches(options.discoveryCache),
    ...(options.log !== undefined ? { log: options.log } : {}),
  });
  const issuer = createIssuer({
    planeServiceId: resolved.id,
    issuer: resolved.issuer,
    defaultTtlSeconds: resolved.ttlSeconds,
    authority: (context) => importedAuthority ?? staticAuthority ?? authorityFor(envOf(context)),
    catalog,
  });

  async function issueCapabilityTokenForCaller(request: IssueForCallerOptions) {
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      throw new SvcConfigurationError('issueCapabilityTokenForCaller: options must be an object');
    }
    if ('subject' in request) {
      throw new CapabilityAuthError('A caller may not assert a delegated subject', {
        status: 403,
        reason: 'subject_not_allowed',
      });
    }
    // Checked here, not only by the issuer: a `confirmationJkt` passed beside the caller would
    // otherwise be stamped as if the plane had proved that key.
    refuseUnknownKeys(request, ISSUE_FOR_CALLER_OPTIONS, 'issueCapabilityTokenForCaller');
    const { caller, ...rest } = request;
    return await issuer.issueCapabilityToken({
      ...rest,
      callerServiceId: caller.serviceId,
      callerAccess: 'service',
      ...(caller.confirmationJkt !== undefined ? { confirmationJkt: caller.confirmationJkt } : {}),
    });
  }

  const tokenEndpoint = createTokenEndpoint({
    authenticators: resolved.authenticators,
    issuer: resolved.issuer,
    log,
    // What issueCapabilityTokenForCaller does, without its copies of the request: the endpoint
    // already refused a subject and kept only the accepted members.
    issue: (caller, body, context) =>
      issuer.issueCapabilityToken(tokenEndpointMintOptions(caller, body, context)),
  });

  const jwksHeaders = httpCacheHeaders(resolved.httpCache, ['svc:jwks']);
  const app = new Hono();

  installRequestIdAndProblemJson(app, {
    // A WebSocket upgrade (the broker's) carries it in the query: browsers set no headers there.
    requestIdOf: (c) =>
      acceptRequestId(c.req.header(SVC_REQUEST_ID_HEADER)) ??
        acceptRequestId(c.req.query(SVC_REQUEST_ID_QUERY_PARAM)) ?? generateRequestId(),
    // A route that threw answered an opaque 500: the log gets the cause.
    end(c, requestId, _startedAt, thrown) {
      if (thrown !== undefined && c.res.status >= 500) {
        log(planeRequestFailed(c.req.raw, requestId, c.res.status, thrown), c);
      }
    },
  });

  app.get(JWKS_PATH, async (c) => {
    const authority = await (staticAuthority ?? authorityFor(c.env));
    return new Response(JSON.stringify(authority.jwks), {
      headers: { 'Content-Type': 'application/jwk-set+json', ...jwksHeaders },
    });
  });

  app.all(
    CAPABILITY_TOKEN_PATH,
    (c) => tokenEndpoint(c.req.raw, contextRequestId(c), c),
  );

  // The reference page's paths are the plane's too: no REST route or broker may take them.
  const reference = resolved.openapi?.reference;
  const planePaths = reference === undefined
    ? RESERVED_PLANE_PATHS
    : [...RESERVED_PLANE_PATHS, ...referenceRoutePaths(reference.path)];
  if (resolved.openapi !== undefined) {
    mountOpenApi(app, {
      catalog,
      options: resolved.openapi,
      publicOrigins: resolved.publicOrigins,
      planePaths,
      ...(resolved.httpCache !== undefined ? { httpCache: resolved.httpCache } : {}),
      log,
    });
    if (reference !== undefined) {
      mountReference(app, {
        reference,
        openApiPath: OPENAPI_PATH,
        title: resolved.openapi.title,
        publicOrigins: resolved.publicOrigins,
        reservedPaths: RESERVED_PLANE_PATHS,
      });
    }
  }

  const sessions = createInProcessSessions({
    planeServiceId: resolved.id,
    catalog,
    issuer,
    timeoutPolicy: resolved.timeoutPolicy,
  });

  // The one invocation path the front doors share, and the middleware that names their callers.
  const frontDoors: FrontDoorDependencies = {
    invocation: createInvocation({
      planeServiceId: resolved.id,
      catalog,
      issuer,
      timeoutPolicy: resolved.timeoutPolicy,
      log,
    }),
    withInvocationMiddleware: createInvocationMiddlewareRunner(resolved.invocationMiddleware, log),
    log,
    logging: options.log !== false,
    options: resolved,
    reservedPaths: planePaths,
    catalog,
  };
  if (resolved.mcp !== false) mountMcpEndpoint(app, frontDoors);
  // The broker first (its path is then reserved for the facade), then the REST facade, after
  // the plane's own routes: they answer first, and the facade never reads their paths.
  const brokerPath = mountBroker(app, {
    ...frontDoors,
    reservedPaths: planePaths.filter((path) => path !== DEFAULT_RPC_PATH),
    rpc: options.rpc,
  });
  mountRestFacade(
    app,
    brokerPath === undefined || planePaths.includes(brokerPath)
      ? frontDoors
      : { ...frontDoors, reservedPaths: [...planePaths, brokerPath] },
  );

  return {
    app,
    fetch: (request: Request, env?: unknown, ctx?: unknown) =>
      app.fetch(request, env, ctx as never) as Promise<Response>,
    async jwks(env?: unknown) {
      return (staticAuthority ? await staticAuthority : await authorityFor(env)).jwks;
    },
    issueCapabilityToken: (request: IssueCapabilityTokenOptions) =>
      issuer.issueCapabilityToken(request),
    issueBrokeredCapabilityToken: (request: IssueCapabilityTokenOptions) =>
      issuer.issueBrokeredCapabilityToken(request),
    issueCapabilityTokenForCaller,
    abilitySession: sessions.abilitySession,
    ready: async () => {
      if (staticAuthority) await staticAuthority;
    },
  };
}

/** The issuer's options for a token-endpoint request the endpoint authenticated and checked. */
function tokenEndpointMintOptions(
  caller: AuthenticatedCaller,
  body: TokenRequestBody,
  context: TokenIssueContext,
): IssueCapabilityTokenOptions {
  const options: IssueCapabilityTokenOptions = {
    targetServiceId: body.targetServiceId,
    scopes: body.scopes,
    context: context.requestContext,
    requestId: context.requestId,
    callerServiceId: caller.serviceId,
    callerAccess: 'service',
  };
  if (body.abilityId !== undefined) options.abilityId = body.abilityId;
  if (body.ttlSeconds !== undefined) options.ttlSeconds = body.ttlSeconds;
  if (caller.confirmationJkt !== undefined) options.confirmationJkt = caller.confirmationJkt;
  return options;
}

/** The runtime environment behind a request context (Hono's `c.env`) or a bare env object. */
function envOf(context: unknown): unknown {
  if (context !== null && typeof context === 'object' && 'env' in context) {
    return (context as { env: unknown }).env;
  }
  return context;
}
