/**
 * Registry caches: where the control plane keeps discovery snapshots between requests, and the
 * `discoveryCache` option that chooses them per purpose (token issuance, OpenAPI, everything else).
 *
 * A registry cache is a small asynchronous key-value store with a per-entry TTL, so a fleet of
 * plane replicas can share one (Redis, Workers KV) while a single process uses
 * {@link memoryRegistryCache}. Values cross the cache as JSON, which is what a shared store would
 * hold anyway; a reader therefore never receives an object another reader can mutate.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';

/** An asynchronous key-value store with per-entry expiry, shared or process-local. */
export interface RegistryCache {
  /** The live value under `key`, or `undefined` when absent or expired. */
  get(key: string): Promise<unknown | undefined>;
  /** Stores a JSON-compatible value for `ttlSeconds` seconds (a positive number). */
  set(key: string, value: unknown, ttlSeconds: number): Promise<void>;
  /** Removes the entry under `key`, if any. */
  delete(key: string): Promise<void>;
}

/** Options of {@link memoryRegistryCache}. */
export interface MemoryRegistryCacheOptions {
  /** Most entries kept; the least recently used entry is evicted beyond it. Default 1000. */
  maxEntries?: number;
  /** Clock in milliseconds since the epoch. Default `Date.now`; tests pass a fake clock. */
  now?: () => number;
}

/** Entries a {@link memoryRegistryCache} keeps when `maxEntries` is not given. */
export const DEFAULT_REGISTRY_CACHE_MAX_ENTRIES = 1000;

/** The largest `maxEntries` accepted: a bound that still means something in one process. */
export const MAX_REGISTRY_CACHE_ENTRIES = 1_000_000;

/** The longest TTL a registry cache entry may ask for: one year. */
export const MAX_REGISTRY_CACHE_TTL_SECONDS = 31_536_000;

interface MemoryEntry {
  /** A deeply frozen plain-data value, kept by reference: nobody can change it. */
  frozen?: unknown;
  /** Any other value, as JSON: every read parses a fresh copy. */
  json?: string;
  expiresAt: number;
}

/** How deep {@link isDeeplyFrozenData} looks before falling back to JSON. */
const MAX_FROZEN_DEPTH = 64;

/**
 * Whether a value is plain JSON data that nobody can change: primitives JSON keeps as they are,
 * and frozen plain objects / arrays of them, without accessors. Such a value reads back the same
 * whether stored by reference or through JSON, so the copy can be skipped.
 */
function isDeeplyFrozenData(value: unknown, depth = 0): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object' || depth > MAX_FROZEN_DEPTH || !Object.isFrozen(value)) {
    return false;
  }
  const prototype = Object.getPrototypeOf(value);
  const isArray = Array.isArray(value);
  if (
    isArray ? prototype !== Array.prototype : prototype !== Object.prototype && prototype !== null
  ) {
    return false;
  }
  for (const key of Reflect.ownKeys(value)) {
    if (isArray && key === 'length') continue;
    const descriptor = Object.getOwnPropertyDescriptor(value, key)!;
    if (typeof key !== 'string' || !('value' in descriptor) || !descriptor.enumerable) return false;
    if (!isDeeplyFrozenData(descriptor.value, depth + 1)) return false;
  }
  return true;
}

function validateMaxEntries(value: unknown): number {
  if (value === undefined) return DEFAULT_REGISTRY_CACHE_MAX_ENTRIES;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 1 ||
    value > MAX_REGISTRY_CACHE_ENTRIES
  ) {
    throw new SvcConfigurationError(
      `memoryRegistryCache: \`maxEntries\` must be an integer from 1 to ${MAX_REGISTRY_CACHE_ENTRIES}`,
      { reason: 'invalid_registry_cache' },
    );
  }
  return value;
}

function validateClock(value: unknown): () => number {
  if (value === undefined) return Date.now;
  if (typeof value !== 'function') {
    throw new SvcConfigurationError('memoryRegistryCache: `now` must be a function', {
      reason: 'invalid_registry_cache',
    });
  }
  return value as () => number;
}

function requireKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError('Registry cache key must be a non-empty string');
  }
  return key;
}

/** Whether a TTL can be stored: a positive finite number of seconds, at most a year. */
export function isValidRegistryCacheTtl(ttlSeconds: unknown): ttlSeconds is number {
  return typeof ttlSeconds === 'number' && Number.isFinite(ttlSeconds) && ttlSeconds > 0 &&
    ttlSeconds <= MAX_REGISTRY_CACHE_TTL_SECONDS;
}

function toJson(value: unknown): string {
  // JSON.stringify returns undefined for undefined, functions and symbols: nothing a later
  // `get` could return faithfully, so the write is refused instead of silently lost.
  const json = JSON.stringify(value);
  if (json === undefined) throw new TypeError('Registry cache values must be JSON-compatible');
  return json;
}

/**
 * A process-local registry cache: bounded (least recently used entry evicted first), honouring
 * each entry's TTL, and storing values as JSON so nobody can mutate cached state through a
 * returned object. A value that is already deeply frozen plain data (the catalog's accepted
 * documents) is kept by reference instead: it cannot be mutated either, and reads skip the
 * parse. Each call to this factory creates an independent cache.
 */
export function memoryRegistryCache(options: MemoryRegistryCacheOptions = {}): RegistryCache {
  if (options === null || typeof options !== 'object') {
    throw new SvcConfigurationError('memoryRegistryCache: options must be an object', {
      reason: 'invalid_registry_cache',
    });
  }
  refuseUnknownKeys(options, ['maxEntries', 'now'], 'memoryRegistryCache', {
    reason: 'invalid_registry_cache',
  });
  const maxEntries = validateMaxEntries(options.maxEntries);
  const now = validateClock(options.now);
  // A Map iterates in insertion order; re-inserting on every hit makes the first key the least
  // recently used one.
  const entries = new Map<string, MemoryEntry>();
  // The key inserted last, while it still is: a hit on it is already in place. Re-inserting
  // costs a deletion, and a Map rebuilds its table once deletions pile up, so a process reading
  // one target's snapshot on every token would rebuild it every few reads.
  let newestKey: string | undefined;

  const forget = (key: string): void => {
    entries.delete(key);
    if (key === newestKey) newestKey = undefined;
  };

  const evictExpired = (at: number): void => {
    for (const [key, entry] of entries) {
      if (entry.expiresAt <= at) forget(key);
    }
  };

  const read = (key: string): unknown => {
    const checkedKey = requireKey(key);
    const entry = entries.get(checkedKey);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= now()) {
      forget(checkedKey);
      return undefined;
    }
    if (checkedKey !== newestKey) {
      entries.delete(checkedKey);
      entries.set(checkedKey, entry);
      newestKey = checkedKey;
    }
    return entry.json !== undefined ? JSON.parse(entry.json) : entry.frozen;
  };

  const cache: RegistryCache = {
    async get(key) {
      return read(key);
    },
    async set(key, value, ttlSeconds) {
      const checkedKey = requireKey(key);
      if (!isValidRegistryCacheTtl(ttlSeconds)) {
        throw new TypeError(
          `Registry cache TTL must be a positive number of seconds, at most ${MAX_REGISTRY_CACHE_TTL_SECONDS}`,
        );
      }
      const stored = isDeeplyFrozenData(value) ? { frozen: value } : { json: toJson(value) };
      const at = now();
      entries.delete(checkedKey);
      if (entries.size >= maxEntries) evictExpired(at);
      while (entries.size >= maxEntries) {
        const oldest = entries.keys().next().value as string;
        entries.delete(oldest);
      }
      entries.set(checkedKey, { ...stored, expiresAt: at + ttlSeconds * 1000 });
      newestKey = checkedKey;
    },
    async delete(key) {
      forget(requireKey(key));
    },
  };
  synchronousReads.set(cache, read);
  return cache;
}

// The caches made by memoryRegistryCache can also be read without a promise: a token mint reads
// its target's snapshot on every call, and the hot path should not pay for a promise per lookup
// to a Map in the same process. Any other cache is read through its asynchronous `get`.
const synchronousReads = new WeakMap<RegistryCache, (key: string) => unknown>();

/**
 * The synchronous read of a cache made by {@link memoryRegistryCache} (same expiry and recency
 * rules as its `get`), or `undefined` for any other cache.
 */
export function synchronousRead(cache: RegistryCache): ((key: string) => unknown) | undefined {
  return synchronousReads.get(cache);
}

/** One purpose's choice: a cache, `false` (always resolve fresh) or `undefined` (the default). */
export type RegistryCacheChoice = RegistryCache | false | undefined;

/**
 * The control plane's `discoveryCache` option. `undefined`: one process-local cache for every
 * purpose. `false`: resolve fresh every time. A cache: that cache for every purpose. An object
 * keyed `token`, `openapi`, `default`: `default` covers REST, broker and MCP (and is a
 * process-local cache when omitted); `token` and `openapi` fall back to whatever `default`
 * resolved to when omitted; `false` under any key means no cache for that purpose.
 */
export type DiscoveryCacheOption = RegistryCache | false | undefined | {
  token?: RegistryCache | false;
  openapi?: RegistryCache | false;
  default?: RegistryCache | false;
};

/** The purposes a discovery snapshot is resolved for. */
export type DiscoveryPurpose = 'token' | 'openapi' | 'default';

/** The cache each purpose uses; `undefined` means resolve fresh every time. */
export interface ResolvedDiscoveryCaches {
  token: RegistryCache | undefined;
  openapi: RegistryCache | undefined;
  default: RegistryCache | undefined;
}

const PURPOSE_KEYS: readonly string[] = ['token', 'openapi', 'default'];

/** Whether a value has the three methods of a {@link RegistryCache}. */
export function isRegistryCache(value: unknown): value is RegistryCache {
  if (value === null || typeof value !== 'object') return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate.get === 'function' && typeof candidate.set === 'function' &&
    typeof candidate.delete === 'function';
}

function refuse(detail: string): never {
  throw new SvcConfigurationError(`discoveryCache: ${detail}`, {
    reason: 'invalid_discovery_cache',
  });
}

function purposeChoice(value: unknown, field: string): RegistryCache | false | undefined {
  if (value === undefined || value === false || isRegistryCache(value)) return value;
  return refuse(`\`${field}\` must be a registry cache (get, set, delete) or false`);
}

function resolveKeyedCaches(option: Record<string, unknown>): ResolvedDiscoveryCaches {
  refuseUnknownKeys(option, PURPOSE_KEYS, 'discoveryCache', { reason: 'invalid_discovery_cache' });
  const defaultChoice = purposeChoice(option.default, 'default');
  const fallback = defaultChoice === undefined
    ? memoryRegistryCache()
    : defaultChoice === false
    ? undefined
    : defaultChoice;
  const pick = (field: 'token' | 'openapi'): RegistryCache | undefined => {
    const choice = purposeChoice(option[field], field);
    if (choice === undefined) return fallback;
    return choice === false ? undefined : choice;
  };
  return { token: pick('token'), openapi: pick('openapi'), default: fallback };
}

/**
 * Resolves the `discoveryCache` option into one cache (or none) per purpose. Purposes given the
 * same cache share entries, so a snapshot fetched for issuance also serves REST. Anything that
 * is neither form refuses the configuration with an error naming the offending field.
 */
export function resolveDiscoveryCaches(option: DiscoveryCacheOption): ResolvedDiscoveryCaches {
  if (option === undefined) {
    const shared = memoryRegistryCache();
    return { token: shared, openapi: shared, default: shared };
  }
  if (option === false) return { token: undefined, openapi: undefined, default: undefined };
  if (isRegistryCache(option)) return { token: option, openapi: option, default: option };
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    return refuse('expected a registry cache, false, or an object keyed token, openapi, default');
  }
  return resolveKeyedCaches(option as Record<string, unknown>);
}
