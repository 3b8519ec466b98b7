/**
 * Where a service gets the control plane's verification keys: a JWKS URL, a Workers service
 * binding to the plane, or a JWKS given inline.
 *
 * Remote sources cache the imported keys for `cacheTtlSeconds` (default 300) and collapse
 * concurrent refreshes into one request. A failed fetch fails closed with `SvcInternalError`
 * (503, retryable, reason `jwks_unavailable`) instead of serving the previous keys, so a key
 * removed for revocation cannot be kept alive by blocking the JWKS route. The failure itself is
 * kept only for `failureCooldownMs` (default 1 s): lookups meanwhile fail at once with it, so
 * a flood of tokens (forged or honest) cannot turn a failing JWKS route into one request per
 * token; the first lookup after it tries again. A fetch whose answer, body included, is not
 * in after `fetchTimeoutMs` has failed, even when the fetcher ignores its abort signal. A kid
 * missing from the cached set reads as unknown until the cache expires (contract Rotation r9):
 * an unknown kid never triggers a fetch, so forged kids cannot be used to hammer the plane. No
 * URL found inside a token is ever fetched: the source is fixed by configuration.
 *
 * @module
 */
import { httpBaseUrlProblem, parseConfiguredUrl } from '../core/http-url.ts';
import {
  type CapabilityKeySet,
  type CapabilityPublicJwk,
  importCapabilityKeys,
  type ImportedCapabilityKeys,
  type JwksProblemHandler,
  readCapabilityJwks,
} from '../core/capability-key-set.ts';
import { type BodyWithHeaders, readBoundedText } from '../core/bounded-body.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { MAX_TIMER_DELAY_MS } from '../core/deadline.ts';
import { hasSvcErrorShape, SvcConfigurationError, SvcInternalError } from '../core/errors.ts';

/** Default lifetime of a fetched JWKS on a service, in seconds. */
export const DEFAULT_JWKS_CACHE_TTL_SECONDS = 300;
/** A JWKS fetch not fully answered (body included) after this long fails (`jwks_unavailable`). */
export const DEFAULT_JWKS_FETCH_TIMEOUT_MS = 5000;
/** JWKS bodies larger than this are refused. */
export const MAX_JWKS_BYTES = 256 * 1024;
/** After a failed JWKS fetch, lookups fail with its error for this long before one retries. */
export const DEFAULT_JWKS_FAILURE_COOLDOWN_MS = 1000;

const JWKS_REQUEST_HEADERS = { accept: 'application/jwk-set+json, application/json' };

/** The request URL a service binding receives when no `url` option is given. */
const DEFAULT_BINDING_JWKS_URL = 'https://control-plane/.well-known/svc/jwks.json';

/** Options shared by the remote JWKS sources. */
export interface RemoteJwksOptions {
  /** How long a fetched JWKS is used before it is fetched again (seconds, default 300). */
  cacheTtlSeconds?: number;
  /** How long one fetch, body included, may take (milliseconds, default 5000). */
  fetchTimeoutMs?: number;
  /**
   * After a failed fetch, how long lookups fail with that failure before the next one fetches
   * again (milliseconds, default 1000; 0 retries on the very next lookup).
   */
  failureCooldownMs?: number;
}

/** Options of {@link jwksFromUrl}. */
export interface JwksFromUrlOptions extends RemoteJwksOptions {
  /** The fetch implementation (defaults to the global `fetch`). */
  fetch?: typeof fetch;
}

/** Options of {@link jwksFromServiceBinding}. */
export interface JwksFromServiceBindingOptions extends RemoteJwksOptions {
  /** The URL put on the request sent through the binding (its host is not resolved). */
  url?: string;
}

/** A Workers service binding (or anything with a `fetch(Request)`) reaching the plane. */
export interface JwksServiceBinding {
  /** Answers the JWKS request the source sends: a `GET` of the plane's JWKS route. */
  fetch(request: Request): Promise<Response>;
}

/** Where and how a JWKS fetch failed, for the operator's log: never sent to a caller. */
export interface JwksFailureDetails {
  /** The JWKS URL requested (for a binding, the URL put on its request). */
  url: string;
  /** The HTTP status the JWKS route answered, when it answered. */
  status?: number;
}

// Kept beside the error rather than on it: an error's own fields cross the wire to the caller.
const failureDetails = new WeakMap<object, Partial<JwksFailureDetails>>();

function noteFailure(error: unknown, details: Partial<JwksFailureDetails>): void {
  if (error === null || typeof error !== 'object') return;
  failureDetails.set(error, { ...failureDetails.get(error), ...details });
}

/**
 * The URL (and HTTP status, when the route answered) of the JWKS fetch that `error` reports, if
 * it is a failure of a remote key set from this module.
 */
export function jwksFailureDetails(error: unknown): JwksFailureDetails | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const details = failureDetails.get(error);
  if (details?.url === undefined) return undefined;
  return { url: details.url, ...(details.status !== undefined ? { status: details.status } : {}) };
}

function unavailable(message: string): SvcInternalError {
  return new SvcInternalError(message, { reason: 'jwks_unavailable', status: 503 });
}

const refuseFetchedJwks: JwksProblemHandler = (problem) => {
  throw unavailable(`The control-plane JWKS is unusable: ${problem}`);
};

function resolveCacheTtlMs(value: unknown, label: string): number {
  if (value === undefined) return DEFAULT_JWKS_CACHE_TTL_SECONDS * 1000;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new SvcConfigurationError(`${label}: cacheTtlSeconds must be a non-negative number`);
  }
  return value * 1000;
}

function resolveTimerMs(
  value: unknown,
  fallback: number,
  { label, field, least }: { label: string; field: string; least: number },
): number {
  if (value === undefined) return fallback;
  // Timers cannot wait longer: a larger delay fires after about 1 ms on every runtime.
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < least ||
    value > MAX_TIMER_DELAY_MS
  ) {
    throw new SvcConfigurationError(
      `${label}: ${field} must be an integer from ${least} to ${MAX_TIMER_DELAY_MS}`,
    );
  }
  return value;
}

const REMOTE_JWKS_OPTIONS: readonly string[] = [
  'cacheTtlSeconds',
  'fetchTimeoutMs',
  'failureCooldownMs',
];
const JWKS_FROM_URL_OPTIONS: readonly string[] = [...REMOTE_JWKS_OPTIONS, 'fetch'];
const JWKS_FROM_BINDING_OPTIONS: readonly string[] = [...REMOTE_JWKS_OPTIONS, 'url'];

/** The options as an object with no key beyond `known` (a misspelt TTL would keep the default). */
function checkRemoteOptions(options: unknown, known: readonly string[], label: string): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${label}: options must be an object`);
  }
  refuseUnknownKeys(options, known, label);
}

function resolveRemoteTimings(options: RemoteJwksOptions, label: string): RemoteTimings {
  return {
    ttlMs: resolveCacheTtlMs(options.cacheTtlSeconds, label),
    timeoutMs: resolveTimerMs(options.fetchTimeoutMs, DEFAULT_JWKS_FETCH_TIMEOUT_MS, {
      label,
      field: 'fetchTimeoutMs',
      least: 1,
    }),
    cooldownMs: resolveTimerMs(options.failureCooldownMs, DEFAULT_JWKS_FAILURE_COOLDOWN_MS, {
      label,
      field: 'failureCooldownMs',
      least: 0,
    }),
  };
}

async function readJwksText(response: BodyWithHeaders): Promise<string> {
  const text = await readBoundedText(response, MAX_JWKS_BYTES);
  if (text === undefined) throw unavailable('The control-plane JWKS is too large');
  return text;
}

type JwksFetcher = (signal: AbortSignal) => Promise<Response>;

/**
 * `body` as a stream that lets go of its source once `signal` aborts, so a sender that stalls
 * after the headers is released even when the fetcher ignores the signal.
 */
function releasedOnAbort(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const release = () => void reader.cancel(signal.reason).catch(() => {});
  // A fetcher that ignored the signal may answer after the deadline: nobody reads that body.
  if (signal.aborted) release();
  else signal.addEventListener('abort', release, { once: true });
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) {
        signal.removeEventListener('abort', release);
        controller.close();
      } else {
        controller.enqueue(value);
      }
    },
    cancel(reason) {
      signal.removeEventListener('abort', release);
      return reader.cancel(reason);
    },
  });
}

async function requestJwks(
  fetcher: JwksFetcher,
  signal: AbortSignal,
): Promise<CapabilityPublicJwk[]> {
  const response = await fetcher(signal);
  if (!response.ok) {
    await response.body?.cancel();
    const error = unavailable(`The control-plane JWKS answered HTTP ${response.status}`);
    noteFailure(error, { status: response.status });
    throw error;
  }
  const body = response.body === null ? null : releasedOnAbort(response.body, signal);
  let jwks: unknown;
  try {
    jwks = JSON.parse(await readJwksText({ headers: response.headers, body }));
  } catch (error) {
    if (hasSvcErrorShape(error)) throw error;
    throw unavailable('The control-plane JWKS is not JSON');
  }
  return readCapabilityJwks(jwks, refuseFetchedJwks);
}

/**
 * Fetches and reads the JWKS within `timeoutMs`. The deadline is a race rather than only an
 * aborted signal: a service binding or custom fetch may ignore the signal, and a refresh that
 * never settles would hold every later lookup behind it.
 */
async function fetchJwks(fetcher: JwksFetcher, timeoutMs: number): Promise<CapabilityPublicJwk[]> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(unavailable(`The control-plane JWKS did not answer within ${timeoutMs} ms`));
      controller.abort();
    }, timeoutMs);
  });
  try {
    return await Promise.race([requestJwks(fetcher, controller.signal), deadline]);
  } catch (error) {
    if (hasSvcErrorShape(error)) throw error;
    throw unavailable('The control-plane JWKS could not be fetched');
  } finally {
    clearTimeout(timer);
  }
}

/** How a remote key set caches, waits and backs off, in milliseconds. */
interface RemoteTimings {
  ttlMs: number;
  timeoutMs: number;
  cooldownMs: number;
}

/**
 * A key set refreshed from a fetcher: cached for a TTL, one refresh at a time, a failure kept
 * only for the cooldown. Keys unchanged across refreshes keep their `CryptoKey` objects.
 */
function cachedRemoteKeySet(
  url: string,
  fetcher: JwksFetcher,
  timings: RemoteTimings,
): CapabilityKeySet {
  let current: { keys: ImportedCapabilityKeys; expiresAt: number } | undefined;
  let refreshing: Promise<ImportedCapabilityKeys> | undefined;
  let failure: { error: unknown; until: number } | undefined;

  const refresh = (): Promise<ImportedCapabilityKeys> => {
    refreshing ??= (async () => {
      try {
        const jwks = await fetchJwks(fetcher, timings.timeoutMs);
        const keys = await importCapabilityKeys(jwks, current?.keys, refuseFetchedJwks);
        current = { keys, expiresAt: Date.now() + timings.ttlMs };
        failure = undefined;
        return keys;
      } catch (error) {
        noteFailure(error, { url });
        failure = { error, until: Date.now() + timings.cooldownMs };
        throw error;
      } finally {
        refreshing = undefined;
      }
    })();
    return refreshing;
  };

  return {
    async getKey(kid: string): Promise<CryptoKey | undefined> {
      const now = Date.now();
      if (current !== undefined && now < current.expiresAt) return current.keys.get(kid)?.key;
      if (failure !== undefined && now < failure.until) throw failure.error;
      return (await refresh()).get(kid)?.key;
    },
    // Only keys still within their cache lifetime: past it, `getKey` decides (and refreshes).
    currentKey(kid: string): CryptoKey | undefined {
      if (current === undefined || Date.now() >= current.expiresAt) return undefined;
      return current.keys.get(kid)?.key;
    },
  };
}

/**
 * Verification keys fetched from the control plane's JWKS URL
 * (`https://<plane>/.well-known/svc/jwks.json`).
 */
export function jwksFromUrl(url: string | URL, options: JwksFromUrlOptions = {}): CapabilityKeySet {
  const label = 'jwksFromUrl';
  checkRemoteOptions(options, JWKS_FROM_URL_OPTIONS, label);
  const target = parseConfiguredUrl(url);
  if (target === undefined) {
    throw new SvcConfigurationError(`${label}: the JWKS URL must be an absolute http(s) URL`);
  }
  const problem = httpBaseUrlProblem(target);
  if (problem !== undefined) {
    throw new SvcConfigurationError(`${label}: the JWKS URL ${problem}`);
  }
  const fetchImpl = options.fetch ?? globalThis.fetch;
  if (typeof fetchImpl !== 'function') {
    throw new SvcConfigurationError(`${label}: no fetch implementation available`);
  }
  const href = target.href;
  return cachedRemoteKeySet(
    href,
    // Not followed: the keys come from the configured place or from nowhere.
    (signal) => fetchImpl(href, { headers: JWKS_REQUEST_HEADERS, signal, redirect: 'manual' }),
    resolveRemoteTimings(options, label),
  );
}

/**
 * Verification keys fetched through a Workers service binding to the control plane. The request
 * URL defaults to `https://control-plane/.well-known/svc/jwks.json`; the binding routes it
 * without resolving the host.
 */
export function jwksFromServiceBinding(
  binding: JwksServiceBinding,
  options: JwksFromServiceBindingOptions = {},
): CapabilityKeySet {
  const label = 'jwksFromServiceBinding';
  if (binding === null || typeof binding !== 'object' || typeof binding.fetch !== 'function') {
    throw new SvcConfigurationError(`${label}: a binding with fetch(request) is required`);
  }
  checkRemoteOptions(options, JWKS_FROM_BINDING_OPTIONS, label);
  const url = options.url ?? DEFAULT_BINDING_JWKS_URL;
  try {
    new URL(url);
  } catch {
    throw new SvcConfigurationError(`${label}: url ${JSON.stringify(url)} is not a URL`);
  }
  return cachedRemoteKeySet(
    url,
    (signal) =>
      binding.fetch(
        new Request(url, { headers: JWKS_REQUEST_HEADERS, signal, redirect: 'manual' }),
      ),
    resolveRemoteTimings(options, label),
  );
}

/**
 * Verification keys from a JWKS given inline. The JWKS is checked now (a bad one throws
 * `SvcConfigurationError` at once); keys are imported once, on first use.
 */
export function staticJwks(jwks: unknown): CapabilityKeySet {
  const accepted = readCapabilityJwks(jwks);
  let imported: ImportedCapabilityKeys | undefined;
  let importing: Promise<ImportedCapabilityKeys> | undefined;
  return {
    async getKey(kid: string): Promise<CryptoKey | undefined> {
      if (imported === undefined) {
        importing ??= importCapabilityKeys(accepted);
        imported = await importing;
      }
      return imported.get(kid)?.key;
    },
    currentKey: (kid: string) => imported?.get(kid)?.key,
  };
}
