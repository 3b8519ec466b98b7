/**
 * The options of `createControlPlane` and their construction-time validation.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { type TimeoutPolicy, validateTimeoutPolicy } from '../core/deadline.ts';
import {
  type HttpCacheOption,
  type ResolvedHttpCache,
  resolveHttpCache,
} from '../core/http-cache.ts';
import type { SvcLogOption } from '../core/logging.ts';
import type { CallerAuthenticator } from './caller-auth.ts';
import type { ServicesOption } from './catalog.ts';
import type { DiscoveryCacheOption } from './registry-cache.ts';
import { validateInvocationMiddleware } from './invocation-middleware.ts';
import {
  DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS,
  MAX_CAPABILITY_TOKEN_TTL_SECONDS,
} from './issuer.ts';
import type { SigningKeysOption } from './signing-keys.ts';
import { type McpOptions, type ResolvedMcpOptions, resolveMcpOptions } from './mcp-options.ts';
import {
  type OpenApiOption,
  type ResolvedOpenApiOptions,
  resolveOpenApiOptions,
} from './openapi-options.ts';
import { type PublicOriginOption, resolvePublicOrigins } from './public-origin.ts';

/** Options of {@link createControlPlane}. */
export interface ControlPlaneOptions {
  /** The control plane's own service id: `spb` of brokered tokens, actor of plane-class calls. Default `control-plane`. */
  id?: string;
  /** The `iss` of every token. Default: the plane id. */
  issuer?: string;
  /** Signing keys: the first signs, every entry is published. A list or a function of the environment. */
  signingKeys: SigningKeysOption;
  /**
   * Who may request tokens at the token endpoint, one authenticator per `Authorization` scheme.
   * Everything admitted is a service-class caller. Default none: every token request is refused.
   */
  authenticateCaller?: CallerAuthenticator | readonly CallerAuthenticator[];
  /** The catalog of services, or a function of the runtime context returning it. */
  services: ServicesOption;
  /**
   * `Cache-Control` and `Cache-Tag: svc:jwks` headers on the JWKS route: `true` for the
   * defaults, or explicit values. Default: no cache headers.
   */
  httpCache?: HttpCacheOption;
  /**
   * Where accepted discovery documents are kept: default a process-local cache (60 s,
   * `DEFAULT_DISCOVERY_CACHE_TTL_SECONDS`); a shared `RegistryCache`; `false` to resolve fresh
   * every time; or an object choosing per purpose (`token`, `openapi`, `default`).
   */
  discoveryCache?: DiscoveryCacheOption;
  /**
   * Budgets of in-process session calls: `defaultMs` when the caller gave none, `maxMs` the
   * clamp on any. Default: no policy (the plane has no built-in default).
   */
  timeout?: TimeoutPolicy;
  /** Event sink of the plane's events (token endpoint, caller auth, catalog); `false` silences it. */
  log?: SvcLogOption;
  /**
   * Token lifetime in seconds, at most `MAX_CAPABILITY_TOKEN_TTL_SECONDS`; default
   * `DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS`. Also the longest lifetime a request may ask for: a
   * longer request gets this one. Size the signing-key rotation overlap window from it.
   */
  ttlSeconds?: number;
  /**
   * Hono middleware `(c, next)` run for every matched front-door request (a published REST
   * route, the MCP endpoint, the broker) and nothing else. Before `next()` it sets `svcCaller`
   * (a `BrokerCaller`), and may set `svcConnInfo`; it reads `svcInvocation`. It may answer by
   * itself (its 401 keeps its `WWW-Authenticate`). Without it every front-door request answers
   * 500 `invocation_caller_missing`.
   */
  invocationMiddleware?: MiddlewareHandler | false;
  /**
   * `GET /openapi.json`, the OpenAPI 3.2 document of the REST facade: `security` and
   * `securitySchemes` (the authentication invocation middleware performs; nothing is invented
   * without them), where the generated document is cached, `title`, `version`, and
   * `reference` (a Swagger UI page over it at `/reference`). Served by default; `false` leaves
   * it unmounted.
   */
  openapi?: OpenApiOption | false;
  /**
   * The origin(s) the plane is reached at from outside (`https://api.example.com`): the
   * OpenAPI `servers` and MCP's endpoint origin. Default none.
   */
  publicOrigin?: PublicOriginOption;
  /**
   * The public RPC broker: `{}` mounts it at `/rpc`, `{ path }` elsewhere; omitted or `false`
   * leaves it unmounted. Its callers are named by `invocationMiddleware`.
   */
  rpc?: false | { path?: string };
  /**
   * The MCP endpoint at `POST /mcp`, served when the catalog publishes MCP projections:
   * `allowedOrigins` (browser origins allowed besides the endpoint origin), `streamLimits`
   * (`maxItems` 10 000, `maxBytes` 1 MiB) and `maxBodyBytes` (1 MiB). `false` leaves it unmounted.
   */
  mcp?: McpOptions | false;
}

/** Options after validation, with defaults applied. */
export interface ResolvedControlPlaneOptions {
  id: string;
  issuer: string;
  authenticators: CallerAuthenticator[] | undefined;
  httpCache?: ResolvedHttpCache;
  timeoutPolicy: TimeoutPolicy;
  ttlSeconds: number;
  invocationMiddleware: MiddlewareHandler | undefined;
  /** `undefined` when `openapi: false`. */
  openapi: ResolvedOpenApiOptions | undefined;
  /** The distinct public origins, empty when none is configured. */
  publicOrigins: readonly string[];
  /** The validated `mcp` option, or `false` when the endpoint is switched off. */
  mcp: ResolvedMcpOptions | false;
}

/**
 * Every key `createControlPlane` reads: the contract's control-plane options, `id`, `issuer`
 * and `publicOrigin`.
 */
const CONTROL_PLANE_OPTIONS: readonly string[] = [
  'id',
  'issuer',
  'signingKeys',
  'authenticateCaller',
  'services',
  'httpCache',
  'discoveryCache',
  'timeout',
  'log',
  'ttlSeconds',
  'invocationMiddleware',
  'mcp',
  'openapi',
  'publicOrigin',
  'rpc',
];

function text(value: unknown, field: string, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.length === 0) {
    throw new SvcConfigurationError(`createControlPlane: \`${field}\` must be a non-empty string`);
  }
  return value;
}

function authenticators(option: unknown): CallerAuthenticator[] | undefined {
  if (option === undefined) return undefined;
  const list = Array.isArray(option) ? option : [option];
  for (const [index, authenticator] of list.entries()) {
    if (
      authenticator === null || typeof authenticator !== 'object' ||
      typeof (authenticator as CallerAuthenticator).authenticate !== 'function'
    ) {
      throw new SvcConfigurationError(
        `createControlPlane: \`authenticateCaller[${index}]\` is not a caller authenticator`,
      );
    }
  }
  return list as CallerAuthenticator[];
}

function ttl(value: unknown): number {
  if (value === undefined) return DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value <= 0 ||
    value > MAX_CAPABILITY_TOKEN_TTL_SECONDS
  ) {
    throw new SvcConfigurationError(
      `createControlPlane: \`ttlSeconds\` must be an integer in 1..${MAX_CAPABILITY_TOKEN_TTL_SECONDS}`,
    );
  }
  return value;
}

/**
 * Validates `createControlPlane` options; every refusal names the option at fault. A key no
 * reader knows (a misspelt `ttlSecond`) is refused rather than leaving its default in force.
 */
export function resolveControlPlaneOptions(
  options: ControlPlaneOptions,
): ResolvedControlPlaneOptions {
  if (options === null || typeof options !== 'object') {
    throw new SvcConfigurationError('createControlPlane: options object required');
  }
  refuseUnknownKeys(options, CONTROL_PLANE_OPTIONS, 'createControlPlane');
  if (options.signingKeys === undefined) {
    throw new SvcConfigurationError('createControlPlane: `signingKeys` is required');
  }
  if (options.services === undefined) {
    throw new SvcConfigurationError('createControlPlane: `services` is required');
  }
  const id = text(options.id, 'id', 'control-plane');
  return {
    id,
    issuer: text(options.issuer, 'issuer', id),
    authenticators: authenticators(options.authenticateCaller),
    httpCache: resolveHttpCache(options.httpCache, 'createControlPlane: `httpCache`'),
    timeoutPolicy: validateTimeoutPolicy(options.timeout ?? {}, 'createControlPlane: `timeout`'),
    ttlSeconds: ttl(options.ttlSeconds),
    invocationMiddleware: validateInvocationMiddleware(options.invocationMiddleware),
    openapi: resolveOpenApiOptions(options.openapi, id),
    publicOrigins: resolvePublicOrigins(options.publicOrigin),
    mcp: options.mcp === false ? false : resolveMcpOptions(options.mcp),
  };
}
