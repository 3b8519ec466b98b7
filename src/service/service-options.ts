/**
 * The options of `createService` and their construction-time validation.
 *
 * @module
 */
import { describeConfigValue, isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import type { MiddlewareHandler } from 'hono';
import { SvcConfigurationError } from '../core/errors.ts';
import type { CapabilityKeySet } from '../core/capability-token.ts';
import {
  TIMEOUT_POLICY_FIELDS,
  type TimeoutPolicy,
  validateServiceMethodCeiling,
  validateTimeoutPolicy,
} from '../core/deadline.ts';
import {
  type HttpCacheOption,
  type ResolvedHttpCache,
  resolveHttpCache,
} from '../core/http-cache.ts';
import type { SvcLogOption } from '../core/logging.ts';
import type { AbilityDefinition } from './ability.ts';
import type { CapabilityCatalog } from './capabilities.ts';
import { staticJwks } from './jwks-sources.ts';
import type { WebSocketUpgrader } from './websocket-upgrade.ts';

/** How a service verifies capability tokens. */
export interface ServiceAuthOptions {
  /** The control plane's JWKS: a key source (`jwksFromUrl`, `jwksFromServiceBinding`) or a JWKS object. */
  jwks: CapabilityKeySet | { keys: readonly unknown[] };
  /** The control plane's issuer (`iss`). */
  issuer: string;
}

/** Ingress: only brokered tokens whose signed `spb` names this control-plane service id are accepted. */
export interface ServiceIngressOptions {
  /** The control plane's service id, expected in the signed `spb` claim. */
  brokerServiceId: string;
}

/** Service-side deadline policy. */
export interface ServiceTimeoutOptions extends TimeoutPolicy {
  /** Service-wide ceiling for unary methods; `false` removes it. Default `DEFAULT_ABILITY_TIMEOUT_MS`. */
  methodMs?: number | false;
}

/** Options of {@link createService}. */
export interface ServiceOptions {
  /**
   * The service id: the audience of tokens for this service, and the prefix of each ability id.
   * Letters, digits, `-` or `_` (no dots), at most 128 characters.
   */
  id: string;
  /** Human-readable name, published in the discovery document. Required. */
  title: string;
  /** The service's own version string, published in the discovery document. Required. */
  version: string;
  /** How capability tokens are verified: the plane's JWKS and issuer. Required. */
  auth: ServiceAuthOptions;
  /**
   * Accept only tokens brokered by this control plane (a signed `spb` naming it); any other
   * token is refused with 403 `ingress_required` before the handler runs. Default: no ingress.
   */
  ingress?: ServiceIngressOptions;
  /** The capability catalog (from `defineCapabilities`) published in the discovery document. */
  capabilities?: CapabilityCatalog;
  /**
   * The abilities served (from `defineAbility`). Each id must start with `<id>.`; RPC paths,
   * REST routes and MCP tool names must be unique across them.
   */
  // deno-lint-ignore no-explicit-any
  abilities: readonly AbilityDefinition<any>[];
  /**
   * `Cache-Control` and `Cache-Tag` headers on the discovery document: `true` for the defaults,
   * or explicit values. Default: no cache headers.
   */
  httpCache?: HttpCacheOption;
  /**
   * Deadlines: `methodMs` is the ceiling of each unary method (default
   * `DEFAULT_ABILITY_TIMEOUT_MS`, 10 s; `false` removes it), `defaultMs` the budget of an
   * HTTP-batch call whose caller sent none, `maxMs` the clamp on any caller budget.
   */
  timeout?: ServiceTimeoutOptions;
  /** `{ log }` receives every event; `false` disables request logging. Default: JSON lines. */
  logger?: SvcLogOption;
  /**
   * The request-id middleware (always on) adopts a well-formed incoming id (`X-Request-Id`
   * header or `request_id` query parameter); otherwise it calls `generator`, and uses a random
   * UUID when that returns a malformed id. Default generator: a random UUID.
   */
  requestId?: { generator?: () => string };
  /** Hono middleware mounted before the service routes (HTTP policy layer), in order. */
  middleware?: MiddlewareHandler | readonly MiddlewareHandler[];
  /** WebSocket upgrade for runtimes where it cannot be found automatically. */
  upgradeWebSocket?: WebSocketUpgrader;
}

/** Options after validation, with defaults applied. */
export interface ResolvedServiceOptions {
  id: string;
  title: string;
  version: string;
  issuer: string;
  keys: CapabilityKeySet;
  brokerServiceId?: string;
  httpCache?: ResolvedHttpCache;
  timeoutPolicy: TimeoutPolicy;
  methodCeilingMs?: number | false;
  middleware: readonly MiddlewareHandler[];
  /** The custom request-id generator, when one was given. */
  requestIdGenerator?: () => string;
}

const SERVICE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Every key `createService` reads: the contract's service options and `upgradeWebSocket`. */
const SERVICE_OPTIONS: readonly string[] = [
  'id',
  'title',
  'version',
  'auth',
  'ingress',
  'capabilities',
  'abilities',
  'httpCache',
  'timeout',
  'logger',
  'requestId',
  'middleware',
  'upgradeWebSocket',
];
const AUTH_OPTIONS: readonly string[] = ['jwks', 'issuer'];
const INGRESS_OPTIONS: readonly string[] = ['brokerServiceId'];
const SERVICE_TIMEOUT_OPTIONS: readonly string[] = ['methodMs', ...TIMEOUT_POLICY_FIELDS];
const REQUEST_ID_OPTIONS: readonly string[] = ['generator'];

function requireText(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new SvcConfigurationError(`createService: \`${field}\` must be a non-empty string`);
  }
  return value;
}

/**
 * The `timeout` option as an object. Checked before it is taken apart: destructuring a number
 * or a string yields no fields, which would read as "no policy" and accept it silently.
 */
function requireTimeoutOptions(timeout: unknown): ServiceTimeoutOptions {
  if (timeout === undefined) return {};
  if (!isPlainObject(timeout)) {
    throw new SvcConfigurationError(
      `createService: \`timeout\` must be an object { methodMs?, defaultMs?, maxMs? } ` +
        `(got ${describeConfigValue(timeout)})`,
      { reason: 'invalid_timeout_policy' },
    );
  }
  return timeout;
}

/** The custom request-id generator; the id middleware would otherwise fail every request. */
function requireRequestIdGenerator(option: unknown): (() => string) | undefined {
  if (option === undefined) return undefined;
  if (!isPlainObject(option)) {
    throw new SvcConfigurationError(
      `createService: \`requestId\` must be an object { generator? } (got ${
        describeConfigValue(option)
      })`,
      { reason: 'invalid_request_id_option' },
    );
  }
  refuseUnknownKeys(option, REQUEST_ID_OPTIONS, 'createService: `requestId`', {
    reason: 'invalid_request_id_option',
  });
  const generator = option.generator;
  if (generator !== undefined && typeof generator !== 'function') {
    throw new SvcConfigurationError(
      `createService: \`requestId.generator\` must be a function returning a request id ` +
        `(got ${describeConfigValue(generator)})`,
      { reason: 'invalid_request_id_option' },
    );
  }
  return generator as (() => string) | undefined;
}

function isKeySet(value: unknown): value is CapabilityKeySet {
  return value !== null && typeof value === 'object' &&
    typeof (value as CapabilityKeySet).getKey === 'function';
}

/**
 * The ingress option's broker id. Ingress is a security control: anything but an object naming
 * exactly `brokerServiceId` is refused, never read as "no ingress".
 */
function requireIngress(option: unknown): string | undefined {
  if (option === undefined) return undefined;
  if (!isPlainObject(option)) {
    throw new SvcConfigurationError(
      `createService: \`ingress\` must be an object { brokerServiceId } (got ${
        describeConfigValue(option)
      })`,
    );
  }
  refuseUnknownKeys(option, INGRESS_OPTIONS, 'createService: `ingress`');
  return requireText(option.brokerServiceId, 'ingress.brokerServiceId');
}

/**
 * Validates `createService` options; every refusal names the field at fault. A key no reader
 * knows (a misspelt `ingres`, `timeout.defaultMS`) is refused: its default would otherwise stay
 * in force unnoticed, and for `ingress` the default is no enforcement at all.
 */
export function resolveServiceOptions(options: ServiceOptions): ResolvedServiceOptions {
  if (options === null || typeof options !== 'object') {
    throw new SvcConfigurationError('createService: options object required');
  }
  refuseUnknownKeys(options, SERVICE_OPTIONS, 'createService');
  const id = requireText(options.id, 'id');
  if (!SERVICE_ID_PATTERN.test(id)) {
    throw new SvcConfigurationError(
      `createService: \`id\` "${id}" must be letters, digits, '-' or '_' (no dots)`,
    );
  }
  const auth = options.auth;
  if (auth === null || typeof auth !== 'object') {
    throw new SvcConfigurationError('createService: `auth` ({ jwks, issuer }) is required');
  }
  refuseUnknownKeys(auth, AUTH_OPTIONS, 'createService: `auth`');
  const issuer = requireText(auth.issuer, 'auth.issuer');
  const keys = isKeySet(auth.jwks) ? auth.jwks : staticJwks(auth.jwks);
  const brokerServiceId = requireIngress(options.ingress);
  if (!Array.isArray(options.abilities)) {
    throw new SvcConfigurationError('createService: `abilities` must be an array');
  }
  const timeout = requireTimeoutOptions(options.timeout);
  const requestIdGenerator = requireRequestIdGenerator(options.requestId);
  const middleware: readonly MiddlewareHandler[] = options.middleware === undefined
    ? []
    : Array.isArray(options.middleware)
    ? options.middleware
    : [options.middleware as MiddlewareHandler];
  for (const [index, handler] of middleware.entries()) {
    if (typeof handler !== 'function') {
      throw new SvcConfigurationError(`createService: \`middleware[${index}]\` is not a function`);
    }
  }
  return {
    id,
    title: requireText(options.title, 'title'),
    version: requireText(options.version, 'version'),
    issuer,
    keys,
    ...(brokerServiceId !== undefined ? { brokerServiceId } : {}),
    httpCache: resolveHttpCache(options.httpCache, 'createService: `httpCache`'),
    timeoutPolicy: validateTimeoutPolicy(
      timeout,
      'createService: `timeout`',
      SERVICE_TIMEOUT_OPTIONS,
    ),
    methodCeilingMs: validateServiceMethodCeiling(
      timeout.methodMs,
      'createService: `timeout.methodMs`',
    ),
    middleware,
    ...(requestIdGenerator !== undefined ? { requestIdGenerator } : {}),
  };
}
