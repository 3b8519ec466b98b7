/**
 * Strict base64url (RFC 4648 §5, no padding) for the compact JWS forms the system signs and
 * verifies.
 *
 * Decoding is canonical: a segment with padding, characters outside the URL-safe alphabet, an
 * impossible length or non-zero trailing bits is refused, so one byte string has exactly one
 * accepted encoding. Native `Uint8Array.fromBase64` / `toBase64` are used where the runtime has
 * them; `atob` / `btoa` otherwise.
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
  const value = base64UrlDigit(text.charCodeAt(text.length - 1));
  return rest === 2 ? (value & 0x0f) === 0 : (value & 0x03) === 0;
}

function base64UrlDigit(code: number): number {
  if (code >= 65 && code <= 90) return code - 65; // A-Z
  if (code >= 97 && code <= 122) return code - 71; // a-z
  if (code >= 48 && code <= 57) return code + 4; // 0-9
  return code === 45 ? 62 : 63; // '-' or '_'
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
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Encodes bytes as unpadded base64url. */
export function encodeBase64Url(bytes: Uint8Array): string {
  if (nativeToBase64 !== undefined) {
    return nativeToBase64.call(bytes, { alphabet: 'base64url', omitPadding: true });
  }
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Encodes a string's UTF-8 bytes as unpadded base64url. */
export function encodeBase64UrlText(text: string): string {
  return encodeBase64Url(utf8Encoder.encode(text));
}
