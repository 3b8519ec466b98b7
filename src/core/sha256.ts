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
import { _HMAC } from '@noble/hashes/hmac.js';
import { type _SHA256, sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

// Each call resets a working state from a pristine copy instead of allocating a new one (a hash
// object, its block buffer and a DataView): on the token-request path that allocation costs more
// than hashing the few blocks. Safe to share: hashing is synchronous, so no two calls interleave.
const pristineSha256 = nobleSha256.create();
const workingSha256 = nobleSha256.create();

// Text up to this many UTF-16 units is encoded into one reused buffer (at most 3 bytes per unit).
const SCRATCH_TEXT_UNITS = 2048;
const textScratch = new Uint8Array(SCRATCH_TEXT_UNITS * 3);
const utf8 = new TextEncoder();

/** The UTF-8 bytes of `text`, in a shared buffer valid until the next call. */
function transientUtf8(text: string): Uint8Array {
  if (text.length > SCRATCH_TEXT_UNITS) return utf8.encode(text);
  return textScratch.subarray(0, utf8.encodeInto(text, textScratch).written);
}

/** SHA-256 of `message` (bytes, or a string hashed as UTF-8); 32 bytes. */
export function sha256(message: Uint8Array | string): Uint8Array {
  const bytes = typeof message === 'string' ? transientUtf8(message) : message;
  return pristineSha256._cloneInto(workingSha256).update(bytes).digest();
}

/** Compares two byte strings in time that depends only on their lengths. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/**
 * An HMAC-SHA256 key whose keyed state is computed once: every signature resets a working copy
 * from it instead of re-deriving the padded key blocks.
 */
export class HmacSha256Key {
  readonly #keyed: _HMAC<_SHA256>;
  readonly #working: _HMAC<_SHA256>;

  constructor(key: Uint8Array) {
    this.#keyed = new _HMAC(nobleSha256, key);
    this.#working = this.#keyed.clone();
  }

  /** The 32-byte MAC of `message` (bytes, or a string taken as UTF-8). */
  sign(message: Uint8Array | string): Uint8Array {
    const bytes = typeof message === 'string' ? transientUtf8(message) : message;
    return this.#keyed._cloneInto(this.#working).update(bytes).digest();
  }

  /** Whether `mac` is the MAC of `message`, compared in constant time. */
  verify(message: Uint8Array | string, mac: Uint8Array): boolean {
    return constantTimeEqual(this.sign(message), mac);
  }
}
