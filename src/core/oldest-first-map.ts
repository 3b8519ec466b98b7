/**
 * A map bounded by entry count, whose oldest entry leaves first when it is full: what the
 * verification caches need, so a flood of distinct keys costs verifications, never memory.
 *
 * @module
 */

/** A `Map` holding at most `maxEntries` entries; setting one more drops the oldest. */
export class OldestFirstMap<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #maxEntries: number;

  /** `maxEntries` ≤ 0 keeps nothing. */
  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  /** The number of entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The entry for `key`, if held. */
  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  /** Stores `value` as the newest entry, evicting the oldest ones while full. */
  set(key: K, value: V): void {
    if (this.#maxEntries <= 0) return;
    this.#entries.delete(key);
    while (this.#entries.size >= this.#maxEntries) {
      this.#entries.delete(this.#entries.keys().next().value as K);
    }
    this.#entries.set(key, value);
  }

  /** Forgets `key`. */
  delete(key: K): void {
    this.#entries.delete(key);
  }

  /** Forgets every entry. */
  clear(): void {
    this.#entries.clear();
  }
}
