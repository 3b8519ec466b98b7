/**
 * Strict base64url (RFC 4648 §5, no padding) for the compact JWS forms the system signs and
 * verifies.
 *
 * Decoding is canonical: a segment with padding, characters outside the URL-safe alphabet, an
 * impossible length or non-zero trailing bits is refused, so one byte string has exactly one
 * accepted encoding. Native `Uint8Array.fromBase64` / `toBase64` are used where the runtime has
 * them; lookup tables otherwise.
 *
 * @module
 */

const ALPHABET_PATTERN = /^[A-Za-z0-9_-]*$/;

interface NativeBase64 {
  fromBase64?: (
    text: string,
    options: { alphabet: string; lastChunkHandling: string },
  ) => Uint8Array<ArrayBuffer>;
}
interface NativeToBase64 {
  toBase64?: (options: { alphabet: string; omitPadding: boolean }) => string;
}

const nativeFromBase64 = (Uint8Array as unknown as NativeBase64).fromBase64;
const nativeToBase64 = (Uint8Array.prototype as unknown as NativeToBase64).toBase64;

const utf8Encoder = new TextEncoder();

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const DIGIT_PAIRS: string[] = [];
for (let pair = 0; pair < 4096; pair++) {
  DIGIT_PAIRS.push(ALPHABET[pair >> 6] + ALPHABET[pair & 0x3f]);
}
// Digit values by character code. Callers check the alphabet first: other codes read as 0.
const DIGITS = new Uint8Array(128);
for (let digit = 0; digit < 64; digit++) DIGITS[ALPHABET.charCodeAt(digit)] = digit;

/** Whether `text` is a canonical, unpadded base64url encoding (the empty string included). */
export function isCanonicalBase64Url(text: string): boolean {
  return ALPHABET_PATTERN.test(text) && hasCanonicalBase64UrlEnding(text);
}

/**
 * Whether text already known to use only the base64url alphabet has a canonical length and
 * ending: a length of 1 modulo 4 is impossible, and the bits of the last character that carry
 * no data must be zero. Hot paths that checked the alphabet of a whole token with one pattern
 * call this per segment.
 */
export function hasCanonicalBase64UrlEnding(text: string): boolean {
  const rest = text.length % 4;
  if (rest === 0) return true;
  if (rest === 1) return false;
  const value = DIGITS[text.charCodeAt(text.length - 1) & 0x7f];
  return rest === 2 ? (value & 0x0f) === 0 : (value & 0x03) === 0;
}

/**
 * Decodes canonical unpadded base64url. Returns `undefined` for anything else, so callers turn a
 * malformed segment into their own specific error.
 */
export function decodeBase64Url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!isCanonicalBase64Url(text)) return undefined;
  return decodeCheckedBase64Url(text);
}

/**
 * Decodes text already known to be canonical base64url (see {@link isCanonicalBase64Url}).
 * Skips the checks on hot paths that validated the whole token with one pattern.
 */
export function decodeCheckedBase64Url(text: string): Uint8Array<ArrayBuffer> {
  if (nativeFromBase64 !== undefined) {
    return nativeFromBase64(text, { alphabet: 'base64url', lastChunkHandling: 'loose' });
  }
  const length = text.length;
  const bytes = new Uint8Array((length * 3) >> 2);
  const whole = length - (length % 4);
  let out = 0;
  let i = 0;
  for (; i < whole; i += 4) {
    const bits = (DIGITS[text.charCodeAt(i)] << 18) | (DIGITS[text.charCodeAt(i + 1)] << 12) |
      (DIGITS[text.charCodeAt(i + 2)] << 6) | DIGITS[text.charCodeAt(i + 3)];
    bytes[out++] = bits >> 16;
    bytes[out++] = (bits >> 8) & 0xff;
    bytes[out++] = bits & 0xff;
  }
  if (length - whole === 2) {
    bytes[out] = ((DIGITS[text.charCodeAt(i)] << 6) | DIGITS[text.charCodeAt(i + 1)]) >> 4;
  } else if (length - whole === 3) {
    const bits = (DIGITS[text.charCodeAt(i)] << 12) | (DIGITS[text.charCodeAt(i + 1)] << 6) |
      DIGITS[text.charCodeAt(i + 2)];
    bytes[out++] = bits >> 10;
    bytes[out] = (bits >> 2) & 0xff;
  }
  return bytes;
}

// The ASCII codes of every pair of digits, as the two bytes they occupy in memory: written as one
// 16-bit unit, a pair lands in the right order whatever the platform's byte order.
const PAIR_UNITS = new Uint16Array(4096);
{
  const pairBytes = new Uint8Array(PAIR_UNITS.buffer);
  for (let pair = 0; pair < 4096; pair++) {
    pairBytes[2 * pair] = ALPHABET.charCodeAt(pair >> 6);
    pairBytes[2 * pair + 1] = ALPHABET.charCodeAt(pair & 0x3f);
  }
}

/**
 * Writes unpadded base64url of `bytes[from..to)` as ASCII, two characters per 16-bit unit, into
 * `out` from unit `unitOffset` (byte `2 * unitOffset` of its buffer), and returns the number of
 * characters written. When that number is odd, the unit holding the last character also receives
 * one more byte after it: callers leave room for it and never read it. Starting at a multiple of
 * three bytes, the characters are the ones the whole array's encoding has there, so a caller can
 * keep an encoded prefix and write only what follows it.
 */
export function writeBase64UrlUnits(
  bytes: Uint8Array,
  from: number,
  to: number,
  out: Uint16Array,
  unitOffset: number,
): number {
  const pairs = PAIR_UNITS;
  const length = to - from;
  const whole = from + length - (length % 3);
  let at = unitOffset;
  let i = from;
  for (; i < whole; i += 3) {
    const bits = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out[at++] = pairs[bits >> 12];
    out[at++] = pairs[bits & 0xfff];
  }
  const encoded = ((whole - from) / 3) * 4;
  if (to - whole === 1) {
    out[at] = pairs[bytes[i] << 4];
    return encoded + 2;
  }
  if (to - whole === 2) {
    const bits = (bytes[i] << 10) | (bytes[i + 1] << 2);
    out[at++] = pairs[bits >> 6];
    out[at] = pairs[(bits & 0x3f) << 6];
    return encoded + 3;
  }
  return encoded;
}

// From digests and signatures up, writing the ASCII codes and decoding them in one call beats
// concatenating pairs (which also leaves a rope to flatten later); below, the call costs more.
const MIN_SCRATCH_ENCODE_BYTES = 24;
const MAX_SCRATCH_ENCODE_BYTES = 3072;
// One unit more than the longest encoding: an odd-length one writes a byte past its end.
const encodeScratchUnits = new Uint16Array((MAX_SCRATCH_ENCODE_BYTES / 3) * 2 + 1);
const encodeScratch = new Uint8Array(encodeScratchUnits.buffer);
const asciiDecoder = new TextDecoder();

/** Encodes bytes as unpadded base64url. */
export function encodeBase64Url(bytes: Uint8Array): string {
  if (nativeToBase64 !== undefined) {
    return nativeToBase64.call(bytes, { alphabet: 'base64url', omitPadding: true });
  }
  const length = bytes.length;
  if (length >= MIN_SCRATCH_ENCODE_BYTES && length <= MAX_SCRATCH_ENCODE_BYTES) {
    const end = writeBase64UrlUnits(bytes, 0, length, encodeScratchUnits, 0);
    return asciiDecoder.decode(encodeScratch.subarray(0, end));
  }
  // Two output characters per table lookup; faster than atob/btoa, which some runtimes
  // implement slowly and which need a binary string and two replacements on top.
  let text = '';
  const whole = bytes.length - (bytes.length % 3);
  let i = 0;
  for (; i < whole; i += 3) {
    const bits = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    text += DIGIT_PAIRS[bits >> 12] + DIGIT_PAIRS[bits & 0xfff];
  }
  if (bytes.length - whole === 1) {
    text += DIGIT_PAIRS[bytes[i] << 4];
  } else if (bytes.length - whole === 2) {
    const bits = (bytes[i] << 10) | (bytes[i + 1] << 2);
    text += DIGIT_PAIRS[bits >> 6] + ALPHABET[bits & 0x3f];
  }
  return text;
}

/** Encodes a string's UTF-8 bytes as unpadded base64url. */
export function encodeBase64UrlText(text: string): string {
  return encodeBase64Url(utf8Encoder.encode(text));
}
