/**
 * The control plane's catalog: the configured service endpoints and, per target, its accepted
 * discovery document.
 *
 * Three properties hold it together:
 *
 * - **One logical catalog.** `services(context)` may read runtime bindings from the context, but
 *   nothing here is keyed by caller: every caller sees the same endpoints and documents.
 * - **Per-target isolation.** A target's discovery has its own timeout, and its failure refuses
 *   only that target. A hung service never delays another target beyond its own resolution.
 * - **Fail closed, never cache a failure.** An unreachable or rejected target is an error every
 *   time until it answers; only accepted documents are cached, for `cacheTtlSeconds`.
 *
 * Refusals:
 *
 * | condition | error |
 * |---|---|
 * | `services(context)` throws, hangs past the discovery timeout or returns an invalid set | `SvcInternalError` 500 `catalog_unavailable` |
 * | target id not configured | `CapabilityAuthError` 403 `unknown_target` |
 * | document `id` or `capabilities.serviceId` differs from the endpoint id | `CapabilityAuthError` 403 `unknown_target` (the registry does not accept it, so no service by that id is known) |
 * | request failed, timed out, or answered other than 200 | `SvcInternalError` 500 `target_unreachable` |
 * | body too large, not UTF-8 JSON, or refused by `parseServiceDiscoveryDocument` | `CapabilityAuthError` 403 `unknown_target` (its discovery failed: the registry accepts no document for it) |
 *
 * Messages name the target but never carry the underlying network error or parser detail (they
 * can reveal internal addresses); those go to the log as `svc.catalog.target_failed`.
 *
 * @module
 */
import { SvcConfigurationError, SvcInternalError } from '../core/errors.ts';
import { MAX_SVC_TIMEOUT_MS } from '../core/deadline.ts';
import { withDeadline, withLazyDeadline } from '../core/settle-within.ts';
import { createEventLog, describeErrorForLog, type SvcLogOption } from '../core/logging.ts';
import type { ServiceDiscoveryDocument } from '../service/discovery.ts';
import { type ServiceEndpoint, validateServiceEndpoint } from './endpoints.ts';
import {
  type DiscoveryPurpose,
  isValidRegistryCacheTtl,
  type RegistryCache,
  type ResolvedDiscoveryCaches,
  synchronousRead,
} from './registry-cache.ts';
import {
  acceptDocument,
  alreadyAccepted,
  DiscoveryFailure,
  fetchDocument,
  targetUnreachable,
  unknownTarget,
} from './target-discovery.ts';

export { MAX_DISCOVERY_DOCUMENT_BYTES } from './target-discovery.ts';

/** The `services` option: a fixed endpoint list, or a function of the runtime context. */
export type ServicesOption =
  | readonly ServiceEndpoint[]
  | ((context: unknown) => readonly ServiceEndpoint[] | Promise<readonly ServiceEndpoint[]>);

/** A target whose discovery document was accepted. */
export interface ResolvedTarget {
  /** The configured endpoint: the identity authority. */
  endpoint: ServiceEndpoint;
  /** Its accepted (deeply frozen) discovery document. */
  document: ServiceDiscoveryDocument;
}

/** One target that could not be resolved in {@link Catalog.all}. */
export interface CatalogTargetFailure {
  /** The target's service id. */
  id: string;
  /** The typed error that target would have been refused with. */
  error: Error;
}

/** Per-resolution details that do not change what is resolved. */
export interface CatalogResolveOptions {
  /** Propagated to the service's discovery request as `X-Request-Id`, and into log events. */
  requestId?: string;
}

/** The catalog built by {@link createCatalog}. */
export interface Catalog {
  /** The configured endpoints by id; fails closed with 500 `catalog_unavailable`. */
  endpoints(context: unknown): Promise<Map<string, ServiceEndpoint>>;
  /** Resolves only that target's discovery document (see the module table for refusals). */
  target(
    targetServiceId: string,
    context: unknown,
    purpose: DiscoveryPurpose,
    options?: CatalogResolveOptions,
  ): Promise<ResolvedTarget>;
  /**
   * The target as a process-local cache holds it right now, read without waiting: only for a
   * fixed endpoint list and a {@link memoryRegistryCache}, and only an accepted document.
   * `undefined` says nothing about the target: resolve it with {@link Catalog.target}.
   */
  peek(targetServiceId: string, purpose: DiscoveryPurpose): ResolvedTarget | undefined;
  /**
   * Every target as {@link Catalog.peek} reads it, or `undefined` unless every configured
   * target is there right now (then resolve them with {@link Catalog.all}).
   */
  peekAll(purpose: DiscoveryPurpose): ResolvedTarget[] | undefined;
  /** Resolves every target in parallel, each with its own timeout; failures are isolated. */
  all(
    context: unknown,
    purpose: DiscoveryPurpose,
    options?: CatalogResolveOptions,
  ): Promise<{ targets: ResolvedTarget[]; failures: CatalogTargetFailure[] }>;
}

/** Options of {@link createCatalog}. */
export interface CatalogOptions {
  /** The configured endpoints. */
  services: ServicesOption;
  /** One cache (or none) per purpose, from `resolveDiscoveryCaches`. */
  caches: ResolvedDiscoveryCaches;
  /** Bound on one target's discovery (request and body), and on `services(context)`. Default 5000. */
  discoveryTimeoutMs?: number;
  /** How long an accepted document stays cached. Default 60. */
  cacheTtlSeconds?: number;
  /** Event sink for catalog failures. */
  log?: SvcLogOption;
}

/** Bound on one target's discovery when `discoveryTimeoutMs` is not given. */
export const DEFAULT_DISCOVERY_TIMEOUT_MS = 5000;

/** How long an accepted discovery document is cached when `cacheTtlSeconds` is not given. */
export const DEFAULT_DISCOVERY_CACHE_TTL_SECONDS = 60;

/** The registry cache key of a target's discovery snapshot. */
export function discoveryCacheKey(targetServiceId: string): string {
  return `svc:discovery:v1:${targetServiceId}`;
}

// Every token request reads the cache under its target's key: a key built afresh each time is a
// new string the cache must hash again, so each target's key is built once. Bounded: ids come
// from configuration, and a services function inventing ids without end only resets the memo.
const MAX_REMEMBERED_CACHE_KEYS = 1024;
const rememberedCacheKeys = new Map<string, string>();

function cacheKeyOf(targetServiceId: string): string {
  let key = rememberedCacheKeys.get(targetServiceId);
  if (key === undefined) {
    if (rememberedCacheKeys.size >= MAX_REMEMBERED_CACHE_KEYS) rememberedCacheKeys.clear();
    key = discoveryCacheKey(targetServiceId);
    rememberedCacheKeys.set(targetServiceId, key);
  }
  return key;
}

const PURPOSES: ReadonlySet<string> = new Set(['token', 'openapi', 'default']);

function validateTimeoutMs(value: unknown): number {
  if (value === undefined) return DEFAULT_DISCOVERY_TIMEOUT_MS;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 1 ||
    value > MAX_SVC_TIMEOUT_MS
  ) {
    throw new SvcConfigurationError(
      `createCatalog: \`discoveryTimeoutMs\` must be an integer from 1 to ${MAX_SVC_TIMEOUT_MS}`,
      { reason: 'invalid_catalog_option' },
    );
  }
  return value;
}

function validateTtl(value: unknown): number {
  if (value === undefined) return DEFAULT_DISCOVERY_CACHE_TTL_SECONDS;
  if (!isValidRegistryCacheTtl(value)) {
    throw new SvcConfigurationError(
      'createCatalog: `cacheTtlSeconds` must be a positive number of seconds (at most a year)',
      { reason: 'invalid_catalog_option' },
    );
  }
  return value;
}

function validateCaches(value: unknown): ResolvedDiscoveryCaches {
  if (value === null || typeof value !== 'object') {
    throw new SvcConfigurationError(
      'createCatalog: `caches` must come from resolveDiscoveryCaches',
      { reason: 'invalid_catalog_option' },
    );
  }
  return value as ResolvedDiscoveryCaches;
}

function catalogUnavailable(): SvcInternalError {
  return new SvcInternalError('The service catalog is unavailable', {
    reason: 'catalog_unavailable',
  });
}

/**
 * Builds a checked endpoint map; duplicates and malformed endpoints throw
 * `SvcConfigurationError`, which callers turn into whatever their phase needs.
 */
function endpointMap(list: unknown, label: string): Map<string, ServiceEndpoint> {
  if (!Array.isArray(list)) {
    throw new SvcConfigurationError(`${label}: services must be an array of endpoints`);
  }
  const map = new Map<string, ServiceEndpoint>();
  list.forEach((value, index) => {
    const endpoint = validateServiceEndpoint(value, `${label}: services[${index}]`);
    if (map.has(endpoint.id)) {
      throw new SvcConfigurationError(
        `${label}: services[${index}] repeats the service id "${endpoint.id}"`,
        { reason: 'duplicate_service_id' },
      );
    }
    map.set(endpoint.id, endpoint);
  });
  return map;
}

interface InFlightDiscovery {
  promise: Promise<ServiceDiscoveryDocument>;
  /** Caches already written with this result, so collapsed waiters write each cache once. */
  writtenTo: Set<RegistryCache>;
}

/**
 * Creates the catalog. A fixed endpoint list is checked now (a duplicate id or a malformed
 * endpoint refuses construction); a `services` function is called per resolution and its
 * result checked each time, failing closed with 500 `catalog_unavailable`.
 */
export function createCatalog(options: CatalogOptions): Catalog {
  if (options === null || typeof options !== 'object') {
    throw new SvcConfigurationError('createCatalog: options must be an object');
  }
  const services = options.services as unknown;
  if (!Array.isArray(services) && typeof services !== 'function') {
    throw new SvcConfigurationError(
      'createControlPlane: `services` must be an array of endpoints or a function returning one',
      { reason: 'invalid_services' },
    );
  }
  const caches = validateCaches(options.caches);
  const timeoutMs = validateTimeoutMs(options.discoveryTimeoutMs);
  const ttlSeconds = validateTtl(options.cacheTtlSeconds);
  const log = createEventLog(options.log);
  const staticEndpoints = Array.isArray(services)
    ? endpointMap(services, 'createControlPlane')
    : undefined;
  const inFlight = new Map<string, InFlightDiscovery>();

  const logFailure = (
    event: string,
    fields: Record<string, unknown>,
    context: unknown,
    requestId: string | undefined,
  ): void => {
    log({
      event,
      level: 'warn',
      ...(requestId !== undefined ? { requestId } : {}),
      ...fields,
    }, context);
  };

  const endpoints = async (
    context: unknown,
    requestId?: string,
  ): Promise<Map<string, ServiceEndpoint>> => {
    // Read only by the callers below, so the fixed list's map is shared, not copied per call.
    if (staticEndpoints !== undefined) return staticEndpoints;
    const produce = services as (
      context: unknown,
    ) => ServiceEndpoint[] | Promise<ServiceEndpoint[]>;
    try {
      const list = await withLazyDeadline(
        () => produce(context),
        timeoutMs,
        () => new Error(`services(context) did not settle within ${timeoutMs} ms`),
      );
      return endpointMap(list, 'services(context)');
    } catch (error) {
      logFailure(
        'svc.catalog.unavailable',
        { error: describeErrorForLog(error) },
        context,
        requestId,
      );
      throw catalogUnavailable();
    }
  };

  const readCached = async (
    cache: RegistryCache,
    targetServiceId: string,
    context: unknown,
    requestId: string | undefined,
  ): Promise<ServiceDiscoveryDocument | undefined> => {
    const key = cacheKeyOf(targetServiceId);
    let value: unknown;
    try {
      value = await withLazyDeadline(
        () => cache.get(key),
        timeoutMs,
        () => new Error(`discovery cache read did not settle within ${timeoutMs} ms`),
      );
    } catch (error) {
      // A cache outage costs a fetch, never a refusal.
      logFailure(
        'svc.catalog.cache_failed',
        {
          target: targetServiceId,
          operation: 'get',
          error: describeErrorForLog(error),
        },
        context,
        requestId,
      );
      return undefined;
    }
    if (value === undefined) return undefined;
    const known = alreadyAccepted(value, targetServiceId);
    if (known !== undefined) return known;
    try {
      // A shared cache is another writer's state: the acceptance rule applies again on read.
      return acceptDocument(value, targetServiceId);
    } catch (error) {
      logFailure(
        'svc.catalog.cache_rejected',
        {
          target: targetServiceId,
          detail: error instanceof DiscoveryFailure ? error.detail : 'unreadable entry',
        },
        context,
        requestId,
      );
      // Like `set`: a shared cache that throws, or answers with no promise, costs nothing more.
      Promise.resolve().then(() => cache.delete(key)).catch(() => {});
      return undefined;
    }
  };

  const writeCached = (
    cache: RegistryCache,
    flight: InFlightDiscovery,
    targetServiceId: string,
    document: ServiceDiscoveryDocument,
    context: unknown,
    requestId: string | undefined,
  ): void => {
    if (flight.writtenTo.has(cache)) return;
    flight.writtenTo.add(cache);
    // Not awaited: a slow shared cache must not hold up the resolution it is caching.
    Promise.resolve()
      .then(() => cache.set(cacheKeyOf(targetServiceId), document, ttlSeconds))
      .catch((error) =>
        logFailure(
          'svc.catalog.cache_failed',
          {
            target: targetServiceId,
            operation: 'set',
            error: describeErrorForLog(error),
          },
          context,
          requestId,
        )
      );
  };

  const discover = (
    endpoint: ServiceEndpoint,
    requestId: string | undefined,
  ): InFlightDiscovery => {
    const existing = inFlight.get(endpoint.id);
    if (existing !== undefined) return existing;
    const promise = withDeadline(
      (signal) => fetchDocument(endpoint, signal, requestId),
      timeoutMs,
      () => new DiscoveryFailure(targetUnreachable(endpoint.id), `timed out after ${timeoutMs} ms`),
    );
    const flight: InFlightDiscovery = { promise, writtenTo: new Set() };
    inFlight.set(endpoint.id, flight);
    // Removed once settled either way: a failure must not be served to later resolutions.
    promise.then(
      () => inFlight.delete(endpoint.id),
      () => inFlight.delete(endpoint.id),
    );
    return flight;
  };

  const resolveEndpoint = async (
    endpoint: ServiceEndpoint,
    context: unknown,
    purpose: DiscoveryPurpose,
    requestId: string | undefined,
  ): Promise<ResolvedTarget> => {
    const cache = caches[purpose];
    if (cache !== undefined) {
      const cached = await readCached(cache, endpoint.id, context, requestId);
      if (cached !== undefined) return { endpoint, document: cached };
    }
    const flight = discover(endpoint, requestId);
    let document: ServiceDiscoveryDocument;
    try {
      document = await flight.promise;
    } catch (error) {
      const failure = error instanceof DiscoveryFailure
        ? error
        : new DiscoveryFailure(targetUnreachable(endpoint.id), describeErrorForLog(error).message);
      logFailure(
        'svc.catalog.target_failed',
        {
          target: endpoint.id,
          reason: (failure.refusal as { reason?: string }).reason,
          detail: failure.detail,
        },
        context,
        requestId,
      );
      throw failure.refusal;
    }
    if (cache !== undefined) {
      writeCached(cache, flight, endpoint.id, document, context, requestId);
    }
    return { endpoint, document };
  };

  const checkPurpose = (purpose: unknown): DiscoveryPurpose => {
    if (typeof purpose !== 'string' || !PURPOSES.has(purpose)) {
      throw new SvcInternalError(`Unknown catalog purpose ${JSON.stringify(purpose)}`, {
        reason: 'invalid_catalog_purpose',
      });
    }
    return purpose as DiscoveryPurpose;
  };

  return {
    // A caller may change what it gets; the fixed list's map is never handed out.
    endpoints: async (context) => new Map(await endpoints(context)),
    async target(targetServiceId, context, purpose, resolveOptions = {}) {
      const checkedPurpose = checkPurpose(purpose);
      const requestId = resolveOptions.requestId;
      const map = await endpoints(context, requestId);
      const endpoint = typeof targetServiceId === 'string' ? map.get(targetServiceId) : undefined;
      if (endpoint === undefined) throw unknownTarget(String(targetServiceId).slice(0, 128));
      return resolveEndpoint(endpoint, context, checkedPurpose, requestId);
    },
    peek(targetServiceId, purpose) {
      const cache = staticEndpoints === undefined ? undefined : caches[purpose];
      const read = cache === undefined ? undefined : synchronousRead(cache);
      const endpoint = read === undefined ? undefined : staticEndpoints!.get(targetServiceId);
      if (endpoint === undefined) return undefined;
      let value: unknown;
      try {
        value = read!(cacheKeyOf(endpoint.id));
      } catch {
        return undefined;
      }
      const document = alreadyAccepted(value, endpoint.id);
      return document === undefined ? undefined : { endpoint, document };
    },
    peekAll(purpose) {
      if (staticEndpoints === undefined) return undefined;
      const targets: ResolvedTarget[] = [];
      for (const id of staticEndpoints.keys()) {
        const target = this.peek(id, purpose);
        if (target === undefined) return undefined;
        targets.push(target);
      }
      return targets;
    },
    async all(context, purpose, resolveOptions = {}) {
      const checkedPurpose = checkPurpose(purpose);
      const requestId = resolveOptions.requestId;
      const map = await endpoints(context, requestId);
      const settled = await Promise.allSettled(
        [...map.values()].map((endpoint) =>
          resolveEndpoint(endpoint, context, checkedPurpose, requestId)
        ),
      );
      const targets: ResolvedTarget[] = [];
      const failures: CatalogTargetFailure[] = [];
      const ids = [...map.keys()];
      settled.forEach((result, index) => {
        if (result.status === 'fulfilled') targets.push(result.value);
        else failures.push({ id: ids[index], error: result.reason as Error });
      });
      return { targets, failures };
    },
  };
}
