/**
 * Service endpoints: how the control plane reaches each configured service (its discovery
 * document and its ability RPC routes) and which callers it grants which scopes.
 *
 * The endpoint configuration is the identity authority: a service is whatever its endpoint says
 * it is, and a discovery document naming another id is not accepted (see the catalog).
 * Everything is checked at construction and refused with a `SvcConfigurationError` naming the
 * field, so a mistyped grant fails the deploy instead of silently denying (or allowing) tokens.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { httpBaseUrlProblem, parseConfiguredUrl } from '../core/http-url.ts';
import { acceptRequestId, SVC_REQUEST_ID_HEADER } from '../core/request-id.ts';
import {
  hasLookalikeCharacter,
  isWildcardScope,
  rpcPathProblem,
  scopeNameProblem,
} from '../service/identifiers.ts';
import { SERVICE_DISCOVERY_PATH } from '../service/service.ts';
import {
  cloudflareServiceBindingRpc,
  httpBatchRpc,
  type RpcFetch,
  type ServiceBindingFetcher,
} from '../caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../caller/transports/websocket.ts';
import {
  cloudflareNativeRpc,
  type NativeAbilityBinding,
} from '../caller/transports/cloudflare-native.ts';

/** Scopes of one target service granted to one caller service. */
export interface ServiceGrant {
  /** The caller's service id (the authenticated caller, or the plane's own id for its calls). */
  caller: string;
  /** Scope names of the target service (at least one); wildcards are refused. */
  scopes: readonly string[];
}

/** How an endpoint reaches its service. */
export type ServiceEndpointKind = 'http' | 'cloudflare-binding' | 'local';

/**
 * The RPC transports an endpoint can open towards one ability route; `cloudflare-binding-rpc`
 * only through an endpoint configured with `abilityRpc`.
 */
export type EndpointRpcKind = 'http-batch' | 'websocket' | 'cloudflare-binding-rpc';

/** One configured service, as the control plane's catalog sees it. */
export interface ServiceEndpoint {
  /** The service id; the only identity a discovery document may claim. */
  readonly id: string;
  /** Who may be issued which of this service's scopes. */
  readonly grants: readonly ServiceGrant[];
  /** How the service is reached. */
  readonly kind: ServiceEndpointKind;
  /** GETs the discovery document; honours `signal` and propagates `requestId`. */
  fetchDiscovery(init: { signal: AbortSignal; requestId?: string }): Promise<Response>;
  /** A caller transport to one ability route, for the broker and in-process sessions. */
  rpcTransport(rpcPath: string, kind: EndpointRpcKind): RpcTransportFactory;
  /** Native ability RPC (a Workers entrypoint), only when configured explicitly. */
  readonly abilityRpc?: unknown;
}

/** Options of {@link httpService}. */
export interface HttpServiceOptions {
  /** The service id. */
  id: string;
  /** Base URL of the service (`http:` or `https:`); routes are resolved below its path. */
  url: string | URL;
  /** Scopes granted per caller: one grant per caller, checked and copied at construction. */
  grants: readonly ServiceGrant[];
  /** Creates WebSockets for the broker's streaming leg (Node 20 has no global `WebSocket`). */
  createWebSocket?: (url: string) => WebSocket;
  /** The `fetch` used for discovery and HTTP-batch. Default: the global `fetch`. */
  fetch?: RpcFetch;
}

/** Options of {@link cloudflareServiceBinding}. */
export interface CloudflareServiceBindingOptions {
  /** The service id. */
  id: string;
  /** The service binding (a `Fetcher`). Discovery and HTTP-batch go through `binding.fetch`. */
  binding: ServiceBindingFetcher;
  /** Scopes granted per caller: one grant per caller, checked and copied at construction. */
  grants: readonly ServiceGrant[];
  /**
   * Native ability RPC: a binding to the service's entrypoint offering `connectAbility`. When
   * set, the plane reaches abilities enabling `cloudflare-binding-rpc` over it (streams first);
   * never inferred from the binding.
   */
  abilityRpc?: NativeAbilityBinding;
  /** Creates WebSockets to the service; a binding offers no WebSocket URL of its own. */
  createWebSocket?: (url: string) => WebSocket;
}

/** Options of {@link localService}. */
export interface LocalServiceOptions {
  /** The service id. */
  id: string;
  /**
   * An in-process service made by `createService`. Its `discovery` method marks it as a service
   * (a control plane has a `fetch` too); the plane reads the document over `fetch` all the same.
   */
  service: {
    fetch(request: Request, env?: unknown, ctx?: unknown): Promise<Response>;
    discovery(): unknown;
  };
  /** Scopes granted per caller: one grant per caller, checked and copied at construction. */
  grants: readonly ServiceGrant[];
}

/** Same rule as `createService` ids: a letter or digit, then letters, digits, `_`, `-`. */
const SERVICE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Caller ids are service ids, but a grant only needs them to be unambiguous text. */
const MAX_CALLER_ID_LENGTH = 256;

/** Base of routes reached in-process or through a binding; the host is never resolved. */
const internalBase = new URL('https://svc.internal/');

const ENDPOINT_KINDS: ReadonlySet<string> = new Set(['http', 'cloudflare-binding', 'local']);

/** Endpoints the factories built: frozen and checked once, so they need no re-check per request. */
const builtEndpoints = new WeakSet<object>();

function built(endpoint: ServiceEndpoint): ServiceEndpoint {
  const frozen = Object.freeze(endpoint);
  builtEndpoints.add(frozen);
  return frozen;
}

const ENDPOINT_REFUSAL = 'invalid_service_endpoint';
const GRANT_FIELDS: readonly string[] = ['caller', 'scopes'];
const HTTP_SERVICE_OPTIONS: readonly string[] = ['id', 'url', 'grants', 'createWebSocket', 'fetch'];
const BINDING_SERVICE_OPTIONS: readonly string[] = [
  'id',
  'binding',
  'grants',
  'abilityRpc',
  'createWebSocket',
];
const LOCAL_SERVICE_OPTIONS: readonly string[] = ['id', 'service', 'grants'];

function refuse(label: string, field: string, problem: string): never {
  throw new SvcConfigurationError(`${label}: \`${field}\` ${problem}`, {
    reason: ENDPOINT_REFUSAL,
  });
}

/** The options as a record with no key beyond `known` (a misspelt one would be ignored). */
function requireOptionsObject(
  value: unknown,
  label: string,
  known: readonly string[],
): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    refuse(label, 'options', 'must be an object');
  }
  refuseUnknownKeys(value, known, label, { reason: ENDPOINT_REFUSAL });
  return value as Record<string, unknown>;
}

/** Checks a service id and returns it. */
export function validateServiceId(value: unknown, label: string, field = 'id'): string {
  if (typeof value !== 'string' || !SERVICE_ID_PATTERN.test(value)) {
    refuse(
      label,
      field,
      'must be 1 to 128 ASCII letters, digits, `_` or `-`, starting with a letter or digit',
    );
  }
  return value;
}

function validateGrantCaller(value: unknown, label: string, field: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    refuse(label, field, 'must be a non-empty string');
  }
  if (value.length > MAX_CALLER_ID_LENGTH || hasLookalikeCharacter(value)) {
    refuse(
      label,
      field,
      `must be at most ${MAX_CALLER_ID_LENGTH} characters without whitespace, control or invisible ` +
        'format characters',
    );
  }
  return value;
}

function validateGrantScopes(value: unknown, label: string, field: string): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    refuse(label, field, 'must be a non-empty array of scope names');
  }
  const scopes = new Set<string>();
  value.forEach((scope: unknown, index: number) => {
    const problem = scopeNameProblem(scope);
    if (problem !== undefined) refuse(label, `${field}[${index}]`, problem);
    if (isWildcardScope(scope as string)) {
      refuse(label, `${field}[${index}]`, 'must name one scope: wildcards are not supported');
    }
    scopes.add(scope as string);
  });
  return [...scopes].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Checks a grant list and returns a frozen copy with each grant's scopes sorted and
 * de-duplicated. Two entries for the same caller are refused rather than merged: the union of
 * two lists is easy to misread in review, one entry per caller is not.
 */
export function validateGrants(
  value: unknown,
  label: string,
  field = 'grants',
): readonly ServiceGrant[] {
  if (!Array.isArray(value)) refuse(label, field, 'must be an array of { caller, scopes }');
  const callers = new Set<string>();
  const grants = value.map((grant: unknown, index: number) => {
    const at = `${field}[${index}]`;
    if (grant === null || typeof grant !== 'object' || Array.isArray(grant)) {
      refuse(label, at, 'must be an object { caller, scopes }');
    }
    const record = grant as Record<string, unknown>;
    refuseUnknownKeys(record, GRANT_FIELDS, `${label}: \`${at}\``, {
      noun: 'field',
      reason: ENDPOINT_REFUSAL,
    });
    const caller = validateGrantCaller(record.caller, label, `${at}.caller`);
    if (callers.has(caller)) {
      refuse(label, `${at}.caller`, `repeats caller "${caller}": list its scopes in one grant`);
    }
    callers.add(caller);
    const scopes = validateGrantScopes(record.scopes, label, `${at}.scopes`);
    return Object.freeze({ caller, scopes: Object.freeze(scopes) });
  });
  return Object.freeze(grants);
}

function validateWebSocketFactory(
  value: unknown,
  label: string,
): ((url: string) => WebSocket) | undefined {
  if (value !== undefined && typeof value !== 'function') {
    refuse(label, 'createWebSocket', 'must be a function (url) => WebSocket');
  }
  return value as ((url: string) => WebSocket) | undefined;
}

function validateBaseUrl(value: unknown, label: string): URL {
  const url = parseConfiguredUrl(value);
  if (url === undefined) return refuse(label, 'url', 'must be an absolute http: or https: URL');
  const problem = httpBaseUrlProblem(url);
  if (problem !== undefined) refuse(label, 'url', problem);
  // A query or fragment cannot be combined with route paths unambiguously.
  if (url.search !== '' || url.hash !== '') {
    refuse(label, 'url', 'must not carry a query or fragment');
  }
  return url;
}

function invalidRpcPath(endpointId: string, problem: string): never {
  throw new SvcConfigurationError(`Service "${endpointId}": the RPC path ${problem}`, {
    reason: 'invalid_rpc_path',
  });
}

/** A route below a base URL's path: `https://h/base` + `/rpc/x` → `https://h/base/rpc/x`. */
function routeBelow(base: URL, path: string): URL {
  const url = new URL(base);
  url.pathname = `${basePath(base)}${path}`;
  return url;
}

/** A base URL's path without its trailing slashes (`''` for the origin itself). */
function basePath(base: URL): string {
  return base.pathname.replace(/\/+$/, '');
}

/**
 * The URL of an ability route below `base`. The path gets the same check as a discovery
 * document's, and the built URL is checked again: a token is sent there, so it must stay on the
 * base origin and below the base path even if some path slipped past the first check.
 */
function rpcRouteUrl(base: URL, rpcPath: unknown, endpointId: string): URL {
  const problem = rpcPathProblem(rpcPath);
  if (problem !== undefined) invalidRpcPath(endpointId, problem);
  const url = routeBelow(base, rpcPath as string);
  if (url.origin !== base.origin || !url.pathname.startsWith(`${basePath(base)}/`)) {
    invalidRpcPath(endpointId, `${JSON.stringify(rpcPath)} leaves the service base URL`);
  }
  return url;
}

function discoveryRequest(url: URL, init: { signal: AbortSignal; requestId?: string }): Request {
  const headers = new Headers({ Accept: 'application/json' });
  // The id is the caller's to choose, so it is forwarded only when well formed, as on every
  // other outbound request: a malformed one must not turn a healthy target into a failed one.
  const requestId = acceptRequestId(init.requestId);
  if (requestId !== undefined) headers.set(SVC_REQUEST_ID_HEADER, requestId);
  // A redirect would let the answer come from somewhere the configuration never named.
  return new Request(url, { method: 'GET', headers, signal: init.signal, redirect: 'manual' });
}

/** Whether `websocketRpc` can dial without a factory (Node 20 has no global `WebSocket`). */
function hasGlobalWebSocket(): boolean {
  return typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function';
}

function noNativeBinding(endpointId: string): never {
  throw new SvcConfigurationError(
    `Service "${endpointId}" has no native binding: pass abilityRpc to cloudflareServiceBinding`,
    { reason: 'native_binding_unavailable' },
  );
}

function unknownRpcKind(endpointId: string, kind: unknown): never {
  throw new SvcConfigurationError(
    `Service "${endpointId}": unknown RPC transport kind ${JSON.stringify(kind)}`,
    { reason: 'invalid_rpc_transport' },
  );
}

function noWebSocketRoute(endpointId: string, how: string): never {
  throw new SvcConfigurationError(
    `Service "${endpointId}" has no WebSocket route: ${how}`,
    { reason: 'websocket_unavailable' },
  );
}

/**
 * A service reached over HTTP(S) at `url`. Discovery is `GET <url>/.well-known/svc/service.json`
 * (redirects are not followed); HTTP-batch posts to `<url><rpcPath>`; WebSocket connects to the
 * same route with `ws:`/`wss:`, through `createWebSocket` when given, else the global
 * `WebSocket` (without either, the endpoint has no WebSocket route).
 */
export function httpService(options: HttpServiceOptions): ServiceEndpoint {
  const label = 'httpService';
  const record = requireOptionsObject(options, label, HTTP_SERVICE_OPTIONS);
  const id = validateServiceId(record.id, label);
  const base = validateBaseUrl(record.url, label);
  const grants = validateGrants(record.grants, label);
  const createWebSocket = validateWebSocketFactory(record.createWebSocket, label);
  if (record.fetch !== undefined && typeof record.fetch !== 'function') {
    refuse(label, 'fetch', 'must be a function (request) => Promise<Response>');
  }
  const customFetch = record.fetch as RpcFetch | undefined;
  const send: RpcFetch = customFetch ?? ((request) => fetch(request));
  const discoveryUrl = routeBelow(base, SERVICE_DISCOVERY_PATH);
  return built({
    id,
    grants,
    kind: 'http' as const,
    fetchDiscovery: (init: { signal: AbortSignal; requestId?: string }) =>
      send(discoveryRequest(discoveryUrl, init)),
    rpcTransport(rpcPath: string, kind: EndpointRpcKind): RpcTransportFactory {
      const url = rpcRouteUrl(base, rpcPath, id);
      if (kind === 'http-batch') {
        return customFetch === undefined ? httpBatchRpc(url) : httpBatchRpc(customFetch, { url });
      }
      if (kind === 'websocket') {
        if (createWebSocket === undefined && !hasGlobalWebSocket()) {
          noWebSocketRoute(id, 'this runtime has no global WebSocket: pass createWebSocket');
        }
        return websocketRpc(url, createWebSocket !== undefined ? { createWebSocket } : {});
      }
      if (kind === 'cloudflare-binding-rpc') return noNativeBinding(id);
      return unknownRpcKind(id, kind);
    },
  });
}

/**
 * A service reached through a Cloudflare service binding. Discovery and HTTP-batch go through
 * `binding.fetch`; WebSocket needs `createWebSocket` (a binding has no URL a socket could
 * dial); `abilityRpc` is kept as given and never inferred from the binding.
 */
export function cloudflareServiceBinding(
  options: CloudflareServiceBindingOptions,
): ServiceEndpoint {
  const label = 'cloudflareServiceBinding';
  const record = requireOptionsObject(options, label, BINDING_SERVICE_OPTIONS);
  const id = validateServiceId(record.id, label);
  const binding = record.binding as ServiceBindingFetcher | undefined;
  if (binding === null || typeof binding !== 'object' || typeof binding.fetch !== 'function') {
    refuse(label, 'binding', 'must be a service binding with a fetch method');
  }
  const grants = validateGrants(record.grants, label);
  const createWebSocket = validateWebSocketFactory(record.createWebSocket, label);
  const discoveryUrl = routeBelow(internalBase, SERVICE_DISCOVERY_PATH);
  let native: RpcTransportFactory | undefined;
  if (record.abilityRpc !== undefined) {
    try {
      native = cloudflareNativeRpc(record.abilityRpc as NativeAbilityBinding);
    } catch {
      refuse(label, 'abilityRpc', 'must be a binding to an entrypoint with connectAbility');
    }
  }
  return built({
    id,
    grants,
    kind: 'cloudflare-binding' as const,
    ...(record.abilityRpc !== undefined ? { abilityRpc: record.abilityRpc } : {}),
    fetchDiscovery: (init: { signal: AbortSignal; requestId?: string }) =>
      binding.fetch(discoveryRequest(discoveryUrl, init)),
    rpcTransport(rpcPath: string, kind: EndpointRpcKind): RpcTransportFactory {
      const url = rpcRouteUrl(internalBase, rpcPath, id);
      if (kind === 'http-batch') return cloudflareServiceBindingRpc(binding, { url });
      if (kind === 'websocket') {
        if (createWebSocket === undefined) {
          noWebSocketRoute(id, 'pass createWebSocket to cloudflareServiceBinding');
        }
        return websocketRpc(url, { createWebSocket });
      }
      if (kind === 'cloudflare-binding-rpc') return native ?? noNativeBinding(id);
      return unknownRpcKind(id, kind);
    },
  });
}

/**
 * A service running in the same process: discovery and HTTP-batch call `service.fetch`
 * directly, with no network and no serialisation beyond what the RPC protocol itself does.
 * This is the embedded default. An in-process service has no WebSocket route.
 */
export function localService(options: LocalServiceOptions): ServiceEndpoint {
  const label = 'localService';
  const record = requireOptionsObject(options, label, LOCAL_SERVICE_OPTIONS);
  const id = validateServiceId(record.id, label);
  const service = record.service as LocalServiceOptions['service'] | undefined;
  // `discovery` tells a service from anything else with a `fetch`: a control plane passed here
  // by mistake would otherwise be accepted and fail each token request with an opaque 500.
  if (
    service === null || typeof service !== 'object' || typeof service.fetch !== 'function' ||
    typeof service.discovery !== 'function'
  ) {
    refuse(
      label,
      'service',
      'must be a service made by createService (with fetch and discovery methods); a control ' +
        'plane or a bare fetch handler is not one',
    );
  }
  const grants = validateGrants(record.grants, label);
  const discoveryUrl = routeBelow(internalBase, SERVICE_DISCOVERY_PATH);
  const send: RpcFetch = (request) => service.fetch(request);
  return built({
    id,
    grants,
    kind: 'local' as const,
    fetchDiscovery: (init: { signal: AbortSignal; requestId?: string }) =>
      send(discoveryRequest(discoveryUrl, init)),
    rpcTransport(rpcPath: string, kind: EndpointRpcKind): RpcTransportFactory {
      const url = rpcRouteUrl(internalBase, rpcPath, id);
      if (kind === 'http-batch') return httpBatchRpc(send, { url });
      if (kind === 'websocket') {
        noWebSocketRoute(id, 'an in-process service is reached over HTTP-batch only');
      }
      if (kind === 'cloudflare-binding-rpc') return noNativeBinding(id);
      return unknownRpcKind(id, kind);
    },
  });
}

/**
 * Checks a value a `services(context)` function returned (or a hand-written endpoint) against
 * the {@link ServiceEndpoint} shape, with the same id and grant rules as the factories. Returns
 * the endpoint unchanged when it passes; throws `SvcConfigurationError` naming the field.
 */
export function validateServiceEndpoint(value: unknown, label: string): ServiceEndpoint {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    refuse(label, 'endpoint', 'must be a service endpoint (httpService, localService, ...)');
  }
  if (builtEndpoints.has(value)) return value as ServiceEndpoint;
  const record = value as Record<string, unknown>;
  validateServiceId(record.id, label, 'id');
  if (typeof record.kind !== 'string' || !ENDPOINT_KINDS.has(record.kind)) {
    refuse(label, 'kind', 'must be http, cloudflare-binding or local');
  }
  if (typeof record.fetchDiscovery !== 'function') {
    refuse(label, 'fetchDiscovery', 'must be a function');
  }
  if (typeof record.rpcTransport !== 'function') {
    refuse(label, 'rpcTransport', 'must be a function');
  }
  validateGrants(record.grants, label);
  return value as ServiceEndpoint;
}
