/**
 * Service-side verification of a proof of possession for a sender-constrained token.
 *
 * Wire format (DESIGN.md): a compact JWS with header `{ alg: 'ES256', typ: 'svc-pop+jwt', jwk }`
 * and claims `{ ath, aud, ab, iat, jti }` (`exp` optional). The proof is signed once at session
 * open and binds one token (`ath`), one service (`aud`) and one ability (`ab`).
 *
 * @module
 */
import { calculateJwkThumbprint, compactVerify, importJWK, type JWK } from 'jose';
import { CapabilityAuthError } from '../core/errors.ts';
import { CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS } from '../core/capability-token.ts';
import { VerifiedProofCache } from './verified-proof-cache.ts';

/** The `typ` header of a proof of possession. */
export const CAPABILITY_PROOF_TYP = 'svc-pop+jwt';
/** How long after `iat` a proof is accepted, before clock skew. */
export const CAPABILITY_PROOF_FRESHNESS_SECONDS = 60;
/** Proofs larger than this are refused before parsing. */
export const MAX_CAPABILITY_PROOF_BYTES = 4096;

const PUBLIC_EC_MEMBERS = new Set(['kty', 'crv', 'x', 'y', 'kid', 'alg', 'use', 'key_ops', 'ext']);

function refuse(reason: string, message: string): never {
  throw new CapabilityAuthError(message, { status: 401, reason });
}

/** The base64url SHA-256 of a token, as carried in a proof's `ath` claim. */
export async function tokenHashForProof(token: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token));
  let binary = '';
  for (const byte of new Uint8Array(digest)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function embeddedPublicKey(header: Record<string, unknown>): JWK {
  const jwk = header.jwk;
  if (jwk === null || typeof jwk !== 'object' || Array.isArray(jwk)) {
    refuse('proof_invalid', 'The proof header carries no public key');
  }
  const members = jwk as Record<string, unknown>;
  for (const member of Object.keys(members)) {
    if (!PUBLIC_EC_MEMBERS.has(member)) {
      refuse('proof_invalid', 'The proof key carries a private or unknown member');
    }
  }
  if (members.kty !== 'EC' || members.crv !== 'P-256') {
    refuse('proof_invalid', 'The proof key must be a P-256 EC key');
  }
  // WebCrypto would read `["<x>"]` as `"<x>"` and verify with it, leaving the thumbprint to fail
  // later on a non-string coordinate: the coordinates are checked here, where a refusal is typed.
  if (typeof members.x !== 'string' || typeof members.y !== 'string') {
    refuse('proof_invalid', 'The proof key coordinates must be base64url strings');
  }
  return members as JWK;
}

function checkHeader(header: Record<string, unknown>): void {
  if (header.alg !== 'ES256') refuse('proof_invalid', 'The proof must be signed with ES256');
  if (header.typ !== CAPABILITY_PROOF_TYP) refuse('proof_invalid', 'The proof has the wrong type');
  for (const member of Object.keys(header)) {
    if (member !== 'alg' && member !== 'typ' && member !== 'jwk') {
      refuse('proof_invalid', `The proof header member "${member}" is not allowed`);
    }
  }
}

function checkFreshness(claims: Record<string, unknown>, nowSeconds: number): void {
  const skew = CAPABILITY_TOKEN_CLOCK_SKEW_SECONDS;
  const iat = claims.iat;
  if (typeof iat !== 'number' || !Number.isInteger(iat)) {
    refuse('proof_invalid', 'Proof iat missing');
  }
  if (iat > nowSeconds + skew) refuse('proof_not_fresh', 'The proof was issued in the future');
  if (nowSeconds - iat > CAPABILITY_PROOF_FRESHNESS_SECONDS + skew) {
    refuse('proof_not_fresh', 'The proof is no longer fresh');
  }
  if (claims.exp !== undefined) {
    if (typeof claims.exp !== 'number' || claims.exp + skew < nowSeconds) {
      refuse('proof_not_fresh', 'The proof has expired');
    }
  }
  if (typeof claims.jti !== 'string' || claims.jti.length === 0) {
    refuse('proof_invalid', 'Proof jti missing');
  }
}

/** What a proof must have been made for, and the clock its freshness is read against. */
export interface ExpectedProof {
  token: string;
  jkt: string;
  audience: string;
  abilityId: string;
  now?: () => number;
}

const verifiedProofs = new VerifiedProofCache();

function clockSeconds(expected: ExpectedProof): number {
  return Math.floor((expected.now?.() ?? Date.now()) / 1000);
}

/**
 * Verifies that `proof` proves possession of the key a token is bound to, for this token,
 * this service and this ability. Throws `CapabilityAuthError` (401) with a specific reason.
 *
 * A proof that verified before against exactly these expectations is not verified again; its
 * freshness is, against the clock, on every call.
 */
export async function verifyCapabilityProof(
  proof: unknown,
  expected: ExpectedProof,
): Promise<void> {
  if (typeof proof === 'string') {
    const known = verifiedProofs.match(proof, expected);
    if (known !== undefined) {
      try {
        checkFreshness(known.freshness, clockSeconds(expected));
      } catch (error) {
        verifiedProofs.delete(proof);
        throw error;
      }
      return;
    }
  }
  await verifyProofAfresh(proof, expected);
}

async function verifyProofAfresh(proof: unknown, expected: ExpectedProof): Promise<void> {
  if (proof === undefined || proof === null) {
    refuse('proof_required', 'This token is bound to a key: a proof of possession is required');
  }
  if (
    typeof proof !== 'string' || proof.length === 0 || proof.length > MAX_CAPABILITY_PROOF_BYTES
  ) {
    refuse('proof_invalid', 'The proof of possession is malformed');
  }
  let header: Record<string, unknown> = {};
  let payload: Uint8Array;
  try {
    const verified = await compactVerify(proof, async (protectedHeader) => {
      header = protectedHeader as Record<string, unknown>;
      checkHeader(header);
      return await importJWK(embeddedPublicKey(header), 'ES256');
    }, { algorithms: ['ES256'] });
    payload = verified.payload;
  } catch (error) {
    if (error instanceof CapabilityAuthError) throw error;
    refuse('proof_invalid', 'The proof of possession did not verify');
  }
  if (await calculateJwkThumbprint(embeddedPublicKey(header), 'sha256') !== expected.jkt) {
    refuse('proof_key_mismatch', 'The proof was not made with the key the token is bound to');
  }
  let claims: Record<string, unknown>;
  try {
    claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
  } catch {
    refuse('proof_invalid', 'The proof payload is not JSON');
  }
  if (claims === null || typeof claims !== 'object' || Array.isArray(claims)) {
    refuse('proof_invalid', 'The proof payload is not an object');
  }
  checkFreshness(claims, clockSeconds(expected));
  if (claims.ath !== await tokenHashForProof(expected.token)) {
    refuse('proof_token_mismatch', 'The proof was made for another token');
  }
  if (claims.aud !== expected.audience) {
    refuse('proof_audience_mismatch', 'The proof was made for another service');
  }
  if (claims.ab !== expected.abilityId) {
    refuse('proof_ability_mismatch', 'The proof was made for another ability');
  }
  verifiedProofs.set(proof as string, {
    token: expected.token,
    jkt: expected.jkt,
    audience: expected.audience,
    abilityId: expected.abilityId,
    freshness: Object.freeze({ iat: claims.iat, exp: claims.exp, jti: claims.jti }),
  });
}
