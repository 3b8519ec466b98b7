/**
 * The caller-side capability-token cache shared by the shipped token requesters.
 *
 * Keys follow the contract (Delegation r4): caller id, target service id, ability id, normalised
 * scopes (sorted, unique), the requested TTL and the complete delegated subject including its
 * kind. A token is renewed before it expires: once less than a third of its lifetime, or less
 * than 30 s, remains, but never before half of it has passed (a short-lived token is still
 * reused, not fetched again for every session). Concurrent requests for one key share one fetch;
 * a failure is never cached. A request may bring an abort signal: when it fires, that request
 * stops waiting, and the fetch is no longer shared with later requests (one a caller gave up on
 * may never answer: a lost request must not hold every later call); those already waiting keep
 * waiting, and once none waits any more its own signal is aborted. A fetch that still answers
 * stores its token, so against a slow plane the fetches in flight for one key are bounded by
 * the plane's latency over the callers' budget, and the first answer serves everyone after it.
 * A fetch unanswered for {@link STALLED_TOKEN_FETCH_MS} is no longer shared either, even with
 * requests that never give up.
 * Lifetimes are measured on the monotonic clock (`performance.now`), so a step of the caller's
 * wall clock neither keeps serving an expired token nor throws away a fresh one.
 *
 * A renewal that fails while the cached token is still valid fails the request that triggered
 * it: the still-valid token is not served in its place, so a refusal by the plane (a grant or
 * caller key withdrawn) takes effect at the next renewal rather than at the token's expiry, and
 * an outage shows up as the requester's retryable error. The old token stays in the cache only
 * as a slot; every later request tries the renewal again.
 *
 * The cache holds at most `MAX_CACHED_CAPABILITY_TOKENS` tokens: when full, expired tokens go
 * first, then the least recently used one. An evicted token is fetched again when next needed.
 *
 * @module
 */

/** Renew when less than this much of a token's lifetime remains, whatever the lifetime. */
export const TOKEN_RENEWAL_MARGIN_MS = 30_000;
/**
 * How long a fetch may go unanswered before later requests for its key stop sharing it and
 * fetch anew: far longer than any healthy plane takes, short enough that a fetch that never
 * answers does not hold every later request.
 */
export const STALLED_TOKEN_FETCH_MS = 30_000;
/** Most tokens one requester keeps. */
export const MAX_CACHED_CAPABILITY_TOKENS = 1024;

/** What identifies one cacheable token. */
export interface CapabilityTokenCacheKeyInput {
  callerServiceId: string;
  targetServiceId: string;
  abilityId?: string;
  scopes: readonly string[];
  ttlSeconds?: number;
  /** A delegated subject (in-process requesters only; the shipped HTTP/RPC ones refuse it). */
  subject?: { id: string; kind?: string; orgId?: string };
}

/** Scopes as the cache key and the request carry them: sorted, duplicates removed. */
export function normalizeRequestedScopes(scopes: readonly string[]): string[] {
  return [...new Set(scopes)].sort();
}

/** The cache key of a token request. */
export function capabilityTokenCacheKey(input: CapabilityTokenCacheKeyInput): string {
  const subject = input.subject === undefined
    ? null
    : [input.subject.id, input.subject.kind ?? null, input.subject.orgId ?? null];
  return JSON.stringify([
    input.callerServiceId,
    input.targetServiceId,
    input.abilityId ?? null,
    normalizeRequestedScopes(input.scopes),
    input.ttlSeconds ?? null,
    subject,
  ]);
}

/** A token just obtained and how long it lives, measured from when it was received. */
export interface FetchedCapabilityToken {
  token: string;
  /** Lifetime in milliseconds from receipt. */
  lifetimeMs: number;
}

interface CachedToken {
  token: string;
  renewAtMs: number;
  expiresAtMs: number;
}

/** One fetch in flight and the requests waiting on it. */
interface InFlightFetch {
  readonly token: Promise<string>;
  readonly controller: AbortController;
  /** Requests waiting that may still give up; one without a signal never does. */
  waiting: number;
  /** Whether a request without a signal waits (the fetch is then never aborted). */
  held: boolean;
  /** When the fetch started, on the cache's clock. */
  readonly startedAtMs: number;
}

/** A token cache with single-flight fetching. */
export interface CapabilityTokenCache {
  /**
   * The cached token for `key` while it is fresh, else the result of one shared `fetchToken`
   * (given a signal aborted once no request waits on it). With `signal`, the request stops
   * waiting when it is aborted, and rejects with its reason.
   */
  get(
    key: string,
    fetchToken: (signal: AbortSignal) => Promise<FetchedCapabilityToken>,
    signal?: AbortSignal,
  ): Promise<string>;
  /** Forgets the token cached for `key` if it is `token` (one a service refused). */
  forget(key: string, token: string): void;
  /** Forgets every cached token. */
  clear(): void;
}

function renewalPoint(receivedAtMs: number, lifetimeMs: number): number {
  const margin = Math.min(Math.max(lifetimeMs / 3, TOKEN_RENEWAL_MARGIN_MS), lifetimeMs / 2);
  return receivedAtMs + lifetimeMs - margin;
}

/** Milliseconds on a clock that only moves forward, whatever happens to the wall clock. */
function monotonicNow(): number {
  return performance.now();
}

/**
 * Creates a token cache. `now` (milliseconds, monotonic by default) is injectable for tests; only
 * differences between its readings matter.
 */
export function createCapabilityTokenCache(
  options: { now?: () => number; maxEntries?: number } = {},
): CapabilityTokenCache {
  const now = options.now ?? monotonicNow;
  const maxEntries = options.maxEntries ?? MAX_CACHED_CAPABILITY_TOKENS;
  const tokens = new Map<string, CachedToken>();
  const inFlight = new Map<string, InFlightFetch>();

  function makeRoom(): void {
    const current = now();
    for (const [key, entry] of tokens) {
      if (entry.expiresAtMs <= current) tokens.delete(key);
    }
    // Least recently used first: a Map iterates in insertion order, and a hit re-inserts.
    for (const key of tokens.keys()) {
      if (tokens.size < maxEntries) break;
      tokens.delete(key);
    }
  }

  async function fetchAndStore(
    key: string,
    fetchToken: (signal: AbortSignal) => Promise<FetchedCapabilityToken>,
    signal: AbortSignal,
  ): Promise<string> {
    const fetched = await fetchToken(signal);
    const receivedAtMs = now();
    if (fetched.lifetimeMs > 0) {
      tokens.delete(key);
      if (tokens.size >= maxEntries) makeRoom();
      tokens.set(key, {
        token: fetched.token,
        renewAtMs: renewalPoint(receivedAtMs, fetched.lifetimeMs),
        expiresAtMs: receivedAtMs + fetched.lifetimeMs,
      });
    }
    return fetched.token;
  }

  /** Waits on a fetch until it settles or `signal` fires, whichever comes first. */
  function waitWithSignal(key: string, pending: InFlightFetch, signal: AbortSignal) {
    pending.waiting++;
    return new Promise<string>((resolve, reject) => {
      let waiting = true;
      const leave = () => {
        if (!waiting) return false;
        waiting = false;
        signal.removeEventListener('abort', giveUp);
        pending.waiting--;
        return true;
      };
      const giveUp = () => {
        if (!leave()) return;
        if (inFlight.get(key) === pending) inFlight.delete(key);
        if (pending.waiting === 0 && !pending.held) pending.controller.abort(signal.reason);
        reject(signal.reason);
      };
      signal.addEventListener('abort', giveUp, { once: true });
      pending.token.then(
        (token) => leave() && resolve(token),
        (error) => leave() && reject(error),
      );
    });
  }

  return {
    get(key, fetchToken, signal) {
      const cached = tokens.get(key);
      if (cached !== undefined && now() < cached.renewAtMs) {
        tokens.delete(key);
        tokens.set(key, cached);
        return Promise.resolve(cached.token);
      }
      if (signal?.aborted) return Promise.reject(signal.reason);
      let pending = inFlight.get(key);
      if (pending === undefined || now() - pending.startedAtMs >= STALLED_TOKEN_FETCH_MS) {
        const controller = new AbortController();
        const entry: InFlightFetch = {
          token: fetchAndStore(key, fetchToken, controller.signal),
          controller,
          waiting: 0,
          held: false,
          startedAtMs: now(),
        };
        const done = () => {
          if (inFlight.get(key) === entry) inFlight.delete(key);
        };
        // Every request waiting may have given up; the outcome then has no reader.
        entry.token.then(done, done);
        inFlight.set(key, entry);
        pending = entry;
      }
      if (signal === undefined) {
        pending.held = true;
        return pending.token;
      }
      return waitWithSignal(key, pending, signal);
    },
    forget(key, token) {
      if (tokens.get(key)?.token === token) tokens.delete(key);
    },
    clear() {
      tokens.clear();
    },
  };
}
