/**
 * The closed claim set of a capability token: its shape rules and its mapping to the verified
 * identity handed to ability handlers.
 *
 * The same reader guards both ends. The issuer runs it before signing, so it can never mint a
 * token the verifier would refuse; the verifier runs it on the signed payload, so a malformed
 * claim is refused rather than silently dropped. Members outside the closed set are left out of
 * what the reader returns, which is how unknown claims are dropped.
 *
 * @module
 */
import type { CallerAccess, VerifiedIdentity } from './identity.ts';

/** The claims of a capability token (the closed set; nothing else survives verification). */
export interface CapabilityTokenClaims {
  /** The control-plane issuer. */
  iss: string;
  /** Plain token: the calling service. Delegated token: the delegated principal id. */
  sub: string;
  /** The target service id (one string, matched exactly). */
  aud: string;
  /** Granted scopes. */
  scp: string[];
  /** Caller access class; absent reads as `plane`. */
  spa?: CallerAccess;
  /** The acting service of a delegated token (RFC 8693 actor semantics). */
  act?: { sub: string };
  /** Broker service id, on brokered (ingress) tokens. */
  spb?: string;
  /** Principal kind of a delegated subject (1..512 characters). */
  spk?: string;
  /** Organization id of a delegated subject. */
  spo?: string;
  /** Key confirmation: RFC 7638 SHA-256 thumbprint of the caller's public JWK. */
  cnf?: { jkt: string };
  /** Token id. */
  jti: string;
  /** Issued at (NumericDate, seconds). */
  iat: number;
  /** Not before (NumericDate, seconds). */
  nbf: number;
  /** Expiry (NumericDate, seconds). */
  exp: number;
}

/** Longest principal kind (`spk`), in characters (Unicode code points). */
export const MAX_PRINCIPAL_KIND_LENGTH = 512;

/** Receives the reason a claim set is malformed; must throw. */
export type ClaimProblemHandler = (problem: string) => never;

const THUMBPRINT_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/**
 * `value`, read as `record[name]` by the caller, if the member is the record's own: a claim
 * inherited from a prototype is no claim. The caller reads the member by its literal name, which
 * engines look up far faster than a computed one.
 */
function own(record: Record<string, unknown>, name: string, value: unknown): unknown {
  // An absent member (most optional claims) costs no ownership check.
  return value !== undefined && Object.hasOwn(record, name) ? value : undefined;
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function requireText(value: unknown, name: string, fail: ClaimProblemHandler): string {
  if (typeof value !== 'string' || value.length === 0) {
    fail(`claim "${name}" must be a non-empty string`);
  }
  return value;
}

function optionalText(value: unknown, name: string, fail: ClaimProblemHandler): string | undefined {
  return value === undefined ? undefined : requireText(value, name, fail);
}

/** The last second a `Date` can hold (ECMA-262: 8.64e15 ms after the epoch). */
const MAX_NUMERIC_DATE = 8.64e12;

function requireNumericDate(value: unknown, name: string, fail: ClaimProblemHandler): number {
  // Past a Date's range, `expiresAt` and the other times handed to handlers would be Invalid Date.
  if (
    typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 ||
    value > MAX_NUMERIC_DATE
  ) {
    fail(`claim "${name}" must be a positive integer NumericDate within a Date's range`);
  }
  return value;
}

function requireScopes(value: unknown, fail: ClaimProblemHandler): string[] {
  if (!Array.isArray(value)) fail('claim "scp" must be an array of scope names');
  const scopes: string[] = [];
  for (const scope of value) {
    if (typeof scope !== 'string' || scope.length === 0) {
      fail('claim "scp" must contain only non-empty strings');
    }
    scopes.push(scope);
  }
  return scopes;
}

function optionalCallerAccess(value: unknown, fail: ClaimProblemHandler): CallerAccess | undefined {
  if (value === undefined || value === 'service' || value === 'plane') return value;
  fail('claim "spa" must be "service" or "plane"');
}

function optionalActor(value: unknown, fail: ClaimProblemHandler): { sub: string } | undefined {
  if (value === undefined) return undefined;
  if (!isPlainRecord(value)) fail('claim "act" must be an object { sub }');
  const members = Object.keys(value);
  if (members.length !== 1 || members[0] !== 'sub') fail('claim "act" must carry exactly "sub"');
  return { sub: requireText(value.sub, 'act.sub', fail) };
}

function codePointLength(text: string): number {
  let length = 0;
  for (const _ of text) length++;
  return length;
}

/**
 * Whether a principal kind is longer than {@link MAX_PRINCIPAL_KIND_LENGTH} characters, counted
 * as Unicode code points: the one count the plane checks before minting and the verifier after.
 */
export function isPrincipalKindTooLong(kind: string): boolean {
  // UTF-16 length bounds the code-point count from above and at most doubles it.
  return kind.length > MAX_PRINCIPAL_KIND_LENGTH &&
    (kind.length > 2 * MAX_PRINCIPAL_KIND_LENGTH ||
      codePointLength(kind) > MAX_PRINCIPAL_KIND_LENGTH);
}

function optionalPrincipalKind(value: unknown, fail: ClaimProblemHandler): string | undefined {
  const kind = optionalText(value, 'spk', fail);
  if (kind !== undefined && isPrincipalKindTooLong(kind)) {
    fail(`claim "spk" must be at most ${MAX_PRINCIPAL_KIND_LENGTH} characters`);
  }
  return kind;
}

function optionalConfirmation(
  value: unknown,
  fail: ClaimProblemHandler,
): { jkt: string } | undefined {
  if (value === undefined) return undefined;
  if (!isPlainRecord(value)) fail('claim "cnf" must be an object { jkt }');
  const members = Object.keys(value);
  if (members.length !== 1 || members[0] !== 'jkt') fail('claim "cnf" must carry exactly "jkt"');
  const jkt = value.jkt;
  if (typeof jkt !== 'string' || !THUMBPRINT_PATTERN.test(jkt)) {
    fail('claim "cnf.jkt" must be a base64url SHA-256 thumbprint');
  }
  return { jkt };
}

/**
 * Reads and checks a claim set, returning a new object holding only the closed set.
 *
 * `value` is the parsed payload. JSON text with a duplicated member name parses to the last
 * occurrence; this reader sees only that parsed value and the identity is built from what it
 * returns, so the value checked is always the value reported.
 *
 * @param fail called with the problem when the claims are malformed; must throw.
 */
export function readCapabilityClaims(
  value: unknown,
  fail: ClaimProblemHandler,
): CapabilityTokenClaims {
  if (!isPlainRecord(value)) fail('the claim set must be a JSON object');
  const iss = requireText(own(value, 'iss', value.iss), 'iss', fail);
  const sub = requireText(own(value, 'sub', value.sub), 'sub', fail);
  const aud = own(value, 'aud', value.aud);
  if (typeof aud !== 'string' || aud.length === 0) {
    fail('claim "aud" must be one non-empty string (the target service id)');
  }
  const scp = requireScopes(own(value, 'scp', value.scp), fail);
  const spa = optionalCallerAccess(own(value, 'spa', value.spa), fail);
  const act = optionalActor(own(value, 'act', value.act), fail);
  const spb = optionalText(own(value, 'spb', value.spb), 'spb', fail);
  const spk = optionalPrincipalKind(own(value, 'spk', value.spk), fail);
  const spo = optionalText(own(value, 'spo', value.spo), 'spo', fail);
  const cnf = optionalConfirmation(own(value, 'cnf', value.cnf), fail);
  const jti = requireText(own(value, 'jti', value.jti), 'jti', fail);
  const iat = requireNumericDate(own(value, 'iat', value.iat), 'iat', fail);
  const nbf = requireNumericDate(own(value, 'nbf', value.nbf), 'nbf', fail);
  const exp = requireNumericDate(own(value, 'exp', value.exp), 'exp', fail);
  if (act === undefined && (spk !== undefined || spo !== undefined)) {
    fail('claims "spk" and "spo" belong to delegated tokens only (no "act")');
  }
  if (act !== undefined && spa === 'service') {
    fail('a delegated token (with "act") is always plane-class, never spa "service"');
  }
  // Fixed member order keeps the signed payload deterministic for the same claims. The token id
  // comes last: a caller's tokens for one target within one second differ in nothing else, so
  // the signer can keep everything before it (see writeClaimsJsonToJti).
  const claims = { iss, sub, aud, scp, iat, nbf, exp } as CapabilityTokenClaims;
  if (spa !== undefined) claims.spa = spa;
  if (act !== undefined) claims.act = act;
  if (spb !== undefined) claims.spb = spb;
  if (spk !== undefined) claims.spk = spk;
  if (spo !== undefined) claims.spo = spo;
  if (cnf !== undefined) claims.cnf = cnf;
  claims.jti = jti;
  return claims;
}

function sameScopes(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Whether two claim sets returned by {@link readCapabilityClaims} hold the same claims in
 * everything but `jti`: then {@link writeClaimsJsonToJti} writes the same bytes for both.
 */
export function sameClaimsBeforeJti(a: CapabilityTokenClaims, b: CapabilityTokenClaims): boolean {
  return a.iss === b.iss && a.sub === b.sub && a.aud === b.aud && a.iat === b.iat &&
    a.nbf === b.nbf && a.exp === b.exp && a.spa === b.spa && a.act?.sub === b.act?.sub &&
    a.spb === b.spb && a.spk === b.spk && a.spo === b.spo && a.cnf?.jkt === b.cnf?.jkt &&
    sameScopes(a.scp, b.scp);
}

const utf8Encoder = new TextEncoder();
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

// Each writer below takes the end written so far and returns the new one, or -1 once the JSON
// does not fit in `out` (and passes a -1 it is given on), so a claim set too large for the
// buffer is reported once, at the end.

/** Member names and punctuation: ASCII the caller wrote, copied as it is. */
function writeAscii(out: Uint8Array, at: number, ascii: string): number {
  if (at < 0 || at + ascii.length > out.length) return -1;
  for (let i = 0; i < ascii.length; i++) out[at++] = ascii.charCodeAt(i);
  return at;
}

// Text JSON writes as it is (printable ASCII other than the quote and the backslash) is copied
// code unit by code unit; the first other character hands the whole text to `JSON.stringify`,
// so every escape is exactly the one it writes.
function writeText(out: Uint8Array, start: number, text: string): number {
  if (start < 0 || start + text.length + 2 > out.length) return -1;
  let at = start;
  out[at++] = QUOTE;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code > 0x7e || code === QUOTE || code === BACKSLASH) {
      return writeEscapedText(out, start, text);
    }
    out[at++] = code;
  }
  out[at++] = QUOTE;
  return at;
}

function writeEscapedText(out: Uint8Array, at: number, text: string): number {
  const json = JSON.stringify(text);
  const { read, written } = utf8Encoder.encodeInto(json, out.subarray(at));
  return read === json.length ? at + written : -1;
}

/** A member whose value is an object of one text member: `opening` ends with that member's name. */
function writeOneTextObject(out: Uint8Array, at: number, opening: string, text: string): number {
  return writeAscii(out, writeText(out, writeAscii(out, at, opening), text), '}');
}

/**
 * Writes the UTF-8 JSON of a claim set returned by {@link readCapabilityClaims} into `out` and
 * returns its length in bytes, or -1 when it does not fit: exactly the bytes of `JSON.stringify`
 * (same member order, same escapes), written directly because the shape is fixed and every
 * token pays for it. The numbers are safe integers, whose decimal text is what JSON writes.
 */
export function writeCapabilityClaimsJson(claims: CapabilityTokenClaims, out: Uint8Array): number {
  return writeClaimsJsonFromJti(claims, out, writeClaimsJsonToJti(claims, out));
}

/**
 * The first part of {@link writeCapabilityClaimsJson}: from the opening brace up to and including
 * the name of `jti`, the last member. A caller's successive tokens for one target share all of it
 * within a second, so a signer that kept these bytes (see {@link sameClaimsBeforeJti}) writes only
 * the rest with {@link writeClaimsJsonFromJti}.
 */
export function writeClaimsJsonToJti(claims: CapabilityTokenClaims, out: Uint8Array): number {
  let at = writeText(out, writeAscii(out, 0, '{"iss":'), claims.iss);
  at = writeText(out, writeAscii(out, at, ',"sub":'), claims.sub);
  at = writeText(out, writeAscii(out, at, ',"aud":'), claims.aud);
  at = writeAscii(out, at, ',"scp":[');
  for (let i = 0; i < claims.scp.length; i++) {
    at = writeText(out, i === 0 ? at : writeAscii(out, at, ','), claims.scp[i]);
  }
  at = writeAscii(out, writeAscii(out, at, '],"iat":'), String(claims.iat));
  at = writeAscii(out, writeAscii(out, at, ',"nbf":'), String(claims.nbf));
  at = writeAscii(out, writeAscii(out, at, ',"exp":'), String(claims.exp));
  if (claims.spa !== undefined) at = writeText(out, writeAscii(out, at, ',"spa":'), claims.spa);
  if (claims.act !== undefined) at = writeOneTextObject(out, at, ',"act":{"sub":', claims.act.sub);
  if (claims.spb !== undefined) at = writeText(out, writeAscii(out, at, ',"spb":'), claims.spb);
  if (claims.spk !== undefined) at = writeText(out, writeAscii(out, at, ',"spk":'), claims.spk);
  if (claims.spo !== undefined) at = writeText(out, writeAscii(out, at, ',"spo":'), claims.spo);
  if (claims.cnf !== undefined) at = writeOneTextObject(out, at, ',"cnf":{"jkt":', claims.cnf.jkt);
  return writeAscii(out, at, ',"jti":');
}

/**
 * The rest of {@link writeCapabilityClaimsJson}: `jti`'s value and the closing brace, written
 * from `at` (what {@link writeClaimsJsonToJti} returned); returns the end, or -1 when it does not
 * fit.
 */
export function writeClaimsJsonFromJti(
  claims: CapabilityTokenClaims,
  out: Uint8Array,
  at: number,
): number {
  return writeAscii(out, writeText(out, at, claims.jti), '}');
}

/** Freezes a claim set read by {@link readCapabilityClaims}, including its nested members. */
export function freezeCapabilityClaims(claims: CapabilityTokenClaims): CapabilityTokenClaims {
  Object.freeze(claims.scp);
  if (claims.act !== undefined) Object.freeze(claims.act);
  if (claims.cnf !== undefined) Object.freeze(claims.cnf);
  return Object.freeze(claims);
}

/**
 * Maps verified claims to the identity given to handlers (contract "Verified identity"). Always
 * returns a fresh object: the service adds `confirmation` to it after a proof verified, and a
 * handler may hold on to it, so it must never be shared between verifications.
 */
export function identityFromClaims(claims: CapabilityTokenClaims): VerifiedIdentity {
  const delegated = claims.act !== undefined;
  const identity: VerifiedIdentity = {
    serviceId: delegated ? claims.act!.sub : claims.sub,
    audience: claims.aud,
    scopes: [...claims.scp],
    tokenId: claims.jti,
    issuer: claims.iss,
    expiresAt: new Date(claims.exp * 1000),
    callerAccess: claims.spa ?? 'plane',
  };
  if (delegated) {
    identity.subject = { id: claims.sub };
    if (claims.spk !== undefined) identity.subject.kind = claims.spk;
    if (claims.spo !== undefined) identity.subject.orgId = claims.spo;
  }
  if (claims.spb !== undefined) identity.brokerServiceId = claims.spb;
  return identity;
}
