/**
 * Remembers proofs of possession that verified, so a caller presenting the same proof again (one
 * HTTP batch per call, each repeating `authenticate(token, proof)`) costs a map lookup and a
 * clock check instead of an ECDSA verification, a key import, a thumbprint and a token hash.
 *
 * An entry is keyed by the exact proof string and holds everything the proof was checked
 * against (the exact token, the bound key's thumbprint, the service, the ability): it answers
 * only a request expecting exactly those, and any other goes through the full verification. What
 * depends on the clock (the proof's freshness window) is never remembered: the verifier checks
 * it again on every hit. Only successes are stored, and the map is bounded: a flood of distinct
 * proofs costs verifications, never memory.
 *
 * @module
 */

import { OldestFirstMap } from '../core/oldest-first-map.ts';

/** What one proof was verified against, and the claims its freshness is read from. */
export interface VerifiedProof {
  readonly token: string;
  readonly jkt: string;
  readonly audience: string;
  readonly abilityId: string;
  /** The proof's `iat`, `exp` (when present) and `jti`, as verified. */
  readonly freshness: Readonly<Record<string, unknown>>;
}

/** Most proofs remembered at once (a proof lives one minute; oldest leave first). */
export const MAX_VERIFIED_PROOFS = 256;

/** A bounded map from proof string to what it verified against. */
export class VerifiedProofCache {
  readonly #entries: OldestFirstMap<string, VerifiedProof>;

  constructor(maxEntries = MAX_VERIFIED_PROOFS) {
    this.#entries = new OldestFirstMap(maxEntries);
  }

  /** The number of proofs held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The entry for `proof` when it was verified against exactly `expected`. */
  match(
    proof: string,
    expected: { token: string; jkt: string; audience: string; abilityId: string },
  ): VerifiedProof | undefined {
    const entry = this.#entries.get(proof);
    if (
      entry === undefined || entry.token !== expected.token || entry.jkt !== expected.jkt ||
      entry.audience !== expected.audience || entry.abilityId !== expected.abilityId
    ) {
      return undefined;
    }
    return entry;
  }

  /** Stores a verified proof, evicting the oldest entry when full. */
  set(proof: string, entry: VerifiedProof): void {
    this.#entries.set(proof, entry);
  }

  /** Forgets a proof (it is no longer fresh). */
  delete(proof: string): void {
    this.#entries.delete(proof);
  }
}
