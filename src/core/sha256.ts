/**
 * Synchronous SHA-256 and HMAC-SHA256 for the small inputs of token requests: the body hash both
 * sides compute and the HMAC caller signature.
 *
 * WebCrypto is the right tool for opaque keys and signatures, but a `crypto.subtle` call has a
 * fixed cost far above the work on a few hundred bytes (on Node each call is a thread-pool round
 * trip: a digest of 150 bytes costs about as much as an ES256 signature), and a token request
 * needs four of them. The hashing itself comes from `@noble/hashes`, an audited library; this
 * file only adds a keyed HMAC state computed once per client and a constant-time comparison.
 *
 * @module
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

/** SHA-256 of `message` (32 bytes). */
export function sha256(message: Uint8Array): Uint8Array {
  return nobleSha256(message);
}

/** Compares two byte strings in time that depends only on their lengths. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/**
 * An HMAC-SHA256 key whose keyed state is computed once: every signature clones it instead of
 * re-deriving the padded key blocks.
 */
export class HmacSha256Key {
  readonly #keyed: ReturnType<typeof hmac.create>;

  constructor(key: Uint8Array) {
    this.#keyed = hmac.create(nobleSha256, key);
  }

  /** The 32-byte MAC of `message`. */
  sign(message: Uint8Array): Uint8Array {
    return this.#keyed.clone().update(message).digest();
  }

  /** Whether `mac` is the MAC of `message`, compared in constant time. */
  verify(message: Uint8Array, mac: Uint8Array): boolean {
    return constantTimeEqual(this.sign(message), mac);
  }
}
