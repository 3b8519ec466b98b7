/**
 * Remembers tokens whose signature and claims already verified, so a caller presenting the same
 * token again (one HTTP-batch per call, say) costs a map lookup instead of an ECDSA verification.
 *
 * An entry is keyed by the exact token string inside the cache of one key set, records the
 * `CryptoKey` that verified it, and never outlives the token's `exp` (plus skew). Everything the
 * verifier decides per use (the key is still published under the kid, issuer, audience, time
 * claims against the current clock) is checked again on every hit by the verifier.
 *
 * @module
 */
import type { CapabilityKeySet } from './capability-key-set.ts';
import { OldestFirstMap } from './oldest-first-map.ts';
import type { CapabilityTokenClaims } from './token-claims.ts';

/** One verified token. */
export interface VerifiedTokenEntry {
  /** The kid the token named. */
  readonly kid: string;
  /** The key that verified the signature; a hit is valid only while the kid maps to it. */
  readonly key: CryptoKey;
  /** The verified, frozen claims. */
  readonly claims: CapabilityTokenClaims;
  /** Milliseconds after which the entry is gone, whatever the key set says. */
  readonly expiresAtMs: number;
}

/** Default bound on the entries kept per key set. */
export const DEFAULT_VERIFIED_TOKEN_CACHE_ENTRIES = 4096;

/** A bounded map from token string to its verification. Oldest entries leave first. */
export class VerifiedTokenCache {
  readonly #entries: OldestFirstMap<string, VerifiedTokenEntry>;

  constructor(maxEntries = DEFAULT_VERIFIED_TOKEN_CACHE_ENTRIES) {
    this.#entries = new OldestFirstMap(maxEntries);
  }

  /** The number of entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The live entry for `token`, dropping it when it has expired at `nowMs`. */
  get(token: string, nowMs: number): VerifiedTokenEntry | undefined {
    const entry = this.#entries.get(token);
    if (entry === undefined) return undefined;
    if (nowMs >= entry.expiresAtMs) {
      this.#entries.delete(token);
      return undefined;
    }
    return entry;
  }

  /** Stores a verification, evicting the oldest entry when full. */
  set(token: string, entry: VerifiedTokenEntry): void {
    this.#entries.set(token, entry);
  }

  /** Forgets a token (its key left the key set, or changed). */
  delete(token: string): void {
    this.#entries.delete(token);
  }

  /** Forgets every token. */
  clear(): void {
    this.#entries.clear();
  }
}

const cachesByKeySet = new WeakMap<CapabilityKeySet, VerifiedTokenCache>();

/** The verified-token cache of a key set (one per key set object, created on first use). */
export function verifiedTokenCacheFor(keys: CapabilityKeySet): VerifiedTokenCache {
  let cache = cachesByKeySet.get(keys);
  if (cache === undefined) {
    cache = new VerifiedTokenCache();
    cachesByKeySet.set(keys, cache);
  }
  return cache;
}
