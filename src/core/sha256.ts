/**
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) computed synchronously, for the small inputs
 * of token requests: the body hash both sides compute and the HMAC caller signature.
 *
 * WebCrypto is the right tool for keys that must stay opaque and for signatures, but a
 * `crypto.subtle` call has a fixed cost far above the work on a few hundred bytes (on Node each
 * call is a thread-pool round trip: a digest of 150 bytes costs as much as an ES256 signature).
 * A token request hashed its body and computed an HMAC on each side, four such calls around one
 * signature. Here the same functions cost a few microseconds each.
 *
 * Nothing here branches or indexes memory on secret data (only additions, rotations and
 * bitwise operations), and MACs are compared in constant time. The round constants and initial
 * hash value are derived at load time from their definition (fractional parts of cube and square
 * roots of the first primes) with exact integer arithmetic; tests check every result against
 * WebCrypto.
 *
 * @module
 */

const BLOCK_BYTES = 64;
const DIGEST_BYTES = 32;

/** The first `count` primes. */
function firstPrimes(count: number): number[] {
  const primes: number[] = [];
  for (let candidate = 2; primes.length < count; candidate++) {
    if (primes.every((prime) => candidate % prime !== 0)) primes.push(candidate);
  }
  return primes;
}

/** The largest integer whose `degree`-th power does not exceed `value` (Newton's method). */
function integerRoot(value: bigint, degree: bigint): bigint {
  let estimate = 1n << (BigInt(value.toString(2).length) / degree + 1n);
  for (;;) {
    const next = ((degree - 1n) * estimate + value / estimate ** (degree - 1n)) / degree;
    if (next >= estimate) return estimate;
    estimate = next;
  }
}

/**
 * The first 32 bits of the fractional part of the `degree`-th root of each prime, as signed
 * 32-bit words: the arithmetic below stays in 32-bit integers only if no operand is a larger
 * unsigned value.
 */
function rootFractionWords(primes: number[], degree: bigint): Int32Array {
  return Int32Array.from(primes, (prime) => {
    const scaled = integerRoot(BigInt(prime) << (32n * degree), degree);
    return Number(BigInt.asIntN(32, scaled));
  });
}

const PRIMES = firstPrimes(64);
/** Round constants: cube roots of the first 64 primes. */
const ROUND_CONSTANTS = rootFractionWords(PRIMES, 3n);
/** Initial hash value: square roots of the first 8 primes. */
const INITIAL_STATE = rootFractionWords(PRIMES.slice(0, 8), 2n);

function rotateRight(word: number, bits: number): number {
  return (word >>> bits) | (word << (32 - bits));
}

/** Processes the 64-byte blocks of `bytes` from `offset` into `state`; `schedule` is scratch. */
function compressBlocks(
  state: Int32Array,
  schedule: Int32Array,
  bytes: Uint8Array,
  offset: number,
  end: number,
): void {
  for (let block = offset; block < end; block += BLOCK_BYTES) {
    for (let t = 0; t < 16; t++) {
      const at = block + t * 4;
      schedule[t] = (bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) |
        bytes[at + 3];
    }
    for (let t = 16; t < 64; t++) {
      const w15 = schedule[t - 15];
      const w2 = schedule[t - 2];
      const sigma0 = rotateRight(w15, 7) ^ rotateRight(w15, 18) ^ (w15 >>> 3);
      const sigma1 = rotateRight(w2, 17) ^ rotateRight(w2, 19) ^ (w2 >>> 10);
      schedule[t] = (schedule[t - 16] + sigma0 + schedule[t - 7] + sigma1) | 0;
    }
    let a = state[0], b = state[1], c = state[2], d = state[3];
    let e = state[4], f = state[5], g = state[6], h = state[7];
    for (let t = 0; t < 64; t++) {
      const sum1 = rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25);
      const choose = (e & f) ^ (~e & g);
      const temp1 = (h + sum1 + choose + ROUND_CONSTANTS[t] + schedule[t]) | 0;
      const sum0 = rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22);
      const majority = (a & b) ^ (a & c) ^ (b & c);
      const temp2 = (sum0 + majority) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + temp1) | 0;
      d = c;
      c = b;
      b = a;
      a = (temp1 + temp2) | 0;
    }
    state[0] = (state[0] + a) | 0;
    state[1] = (state[1] + b) | 0;
    state[2] = (state[2] + c) | 0;
    state[3] = (state[3] + d) | 0;
    state[4] = (state[4] + e) | 0;
    state[5] = (state[5] + f) | 0;
    state[6] = (state[6] + g) | 0;
    state[7] = (state[7] + h) | 0;
  }
}

// Scratch space reused by every hash: the functions here never yield, so no two hashes overlap.
const scratchSchedule = new Int32Array(64);
const scratchTail = new Uint8Array(2 * BLOCK_BYTES);

function writeWord(bytes: Uint8Array, at: number, word: number): void {
  bytes[at] = word >>> 24;
  bytes[at + 1] = word >>> 16;
  bytes[at + 2] = word >>> 8;
  bytes[at + 3] = word;
}

/**
 * Finishes a hash whose `state` already absorbed `prefixBytes` bytes (whole blocks) and still
 * has to absorb `message`: the full blocks, then the padded tail carrying the total bit length.
 */
function finishDigest(state: Int32Array, prefixBytes: number, message: Uint8Array): Uint8Array {
  const wholeEnd = message.length - (message.length % BLOCK_BYTES);
  compressBlocks(state, scratchSchedule, message, 0, wholeEnd);
  const rest = message.length - wholeEnd;
  // One 0x80 byte and an 8-byte length must fit after the rest: one block, or two.
  const tailLength = rest + 9 <= BLOCK_BYTES ? BLOCK_BYTES : 2 * BLOCK_BYTES;
  const tail = scratchTail;
  tail.fill(0, 0, tailLength);
  tail.set(message.subarray(wholeEnd));
  tail[rest] = 0x80;
  const bitLength = (prefixBytes + message.length) * 8;
  writeWord(tail, tailLength - 8, Math.floor(bitLength / 2 ** 32));
  writeWord(tail, tailLength - 4, bitLength);
  compressBlocks(state, scratchSchedule, tail, 0, tailLength);
  const digest = new Uint8Array(DIGEST_BYTES);
  for (let i = 0; i < 8; i++) writeWord(digest, i * 4, state[i]);
  return digest;
}

/** The SHA-256 digest (32 bytes) of `message`. */
export function sha256(message: Uint8Array): Uint8Array {
  return finishDigest(INITIAL_STATE.slice(), 0, message);
}

/** Whether two byte strings are equal, in time that depends only on their lengths. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

/** The state after absorbing one block: the key XORed with a pad byte. */
function paddedKeyState(key: Uint8Array, pad: number): Int32Array {
  const block = new Uint8Array(BLOCK_BYTES).fill(pad);
  for (let i = 0; i < key.length; i++) block[i] ^= key[i];
  const state = INITIAL_STATE.slice();
  compressBlocks(state, scratchSchedule, block, 0, BLOCK_BYTES);
  return state;
}

/**
 * An HMAC-SHA256 key. The inner and outer padded-key blocks are absorbed once, when the key is
 * made, so a MAC costs only the message's own blocks plus one for the outer hash.
 */
export class HmacSha256Key {
  readonly #inner: Int32Array;
  readonly #outer: Int32Array;

  /** A key from its raw bytes (a key longer than a block is hashed first, as RFC 2104 says). */
  constructor(key: Uint8Array) {
    const material = key.length > BLOCK_BYTES ? sha256(key) : key;
    this.#inner = paddedKeyState(material, 0x36);
    this.#outer = paddedKeyState(material, 0x5c);
  }

  /** The 32-byte MAC of `message`. */
  sign(message: Uint8Array): Uint8Array {
    const innerDigest = finishDigest(this.#inner.slice(), BLOCK_BYTES, message);
    return finishDigest(this.#outer.slice(), BLOCK_BYTES, innerDigest);
  }

  /** Whether `mac` is the MAC of `message`, compared in constant time. */
  verify(message: Uint8Array, mac: Uint8Array): boolean {
    return constantTimeEqual(this.sign(message), mac);
  }
}
