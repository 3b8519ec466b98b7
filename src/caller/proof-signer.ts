/**
 * The caller side of sender-constrained tokens: signs the proof of possession a service checks
 * (see `src/service/proof-verify.ts`) when a session opens with a token bound to the caller's key.
 *
 * Proof: compact JWS, header `{ alg: 'ES256', typ: 'svc-pop+jwt', jwk: <public P-256 JWK> }`,
 * claims `{ ath: base64url SHA-256 of the token, aud: target service id, ab: ability id, iat,
 * jti }`. The signer refuses locally, before signing anything, when the token is not bound to
 * its own key: during a caller key rotation that is the signal to re-request the token.
 *
 * @module
 */
import { decodeBase64Url } from '../core/base64url.ts';
import { capabilityKeyThumbprint } from '../core/capability-token.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import type { ProofSigner } from './ability-session.ts';
import { CAPABILITY_PROOF_TYP, tokenHashForProof } from '../service/proof-verify.ts';
import {
  type CallerSigningKey,
  checkPrivateP256Jwk,
  importCallerSigningKey,
  signCompactEs256,
} from './token-request-signing.ts';

/** Options of {@link jwkCapabilityProofSigner}. */
export interface JwkCapabilityProofSignerOptions {
  /** The caller's private P-256 JWK: the key the plane bound the token to. */
  privateJwk: JsonWebKey;
  /** Clock in milliseconds for `iat`; default `Date.now`. */
  now?: () => number;
}

const PROOF_SIGNER_OPTIONS: readonly string[] = ['privateJwk', 'now'];
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The `cnf.jkt` of a token, read without verifying it (the service verifies). */
export function boundKeyThumbprint(token: string): string | undefined {
  const payload = typeof token === 'string' ? token.split('.')[1] : undefined;
  const bytes = payload === undefined ? undefined : decodeBase64Url(payload);
  if (bytes === undefined) {
    throw new CapabilityAuthError('The capability token is malformed', {
      status: 401,
      reason: 'token_malformed',
    });
  }
  let claims: unknown;
  try {
    claims = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    throw new CapabilityAuthError('The capability token is malformed', {
      status: 401,
      reason: 'token_malformed',
    });
  }
  const cnf = (claims as { cnf?: unknown } | null)?.cnf;
  const jkt = (cnf as { jkt?: unknown } | null | undefined)?.jkt;
  return typeof jkt === 'string' ? jkt : undefined;
}

/**
 * A proof signer for tokens bound to `privateJwk`. The key is imported once. Each call checks
 * that the token's `cnf.jkt` is the thumbprint of this key and throws `CapabilityAuthError`
 * (401, reason `proof_key_mismatch`) instead of emitting a proof when it is not, including when
 * the token is not bound at all.
 */
export function jwkCapabilityProofSigner(options: JwkCapabilityProofSignerOptions): ProofSigner {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(
      'jwkCapabilityProofSigner: options must be { privateJwk, now? }',
    );
  }
  refuseUnknownKeys(options, PROOF_SIGNER_OPTIONS, 'jwkCapabilityProofSigner');
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new SvcConfigurationError('jwkCapabilityProofSigner: `now` must be a function');
  }
  checkPrivateP256Jwk(options.privateJwk, 'jwkCapabilityProofSigner');
  const now = options.now ?? Date.now;
  let imported: Promise<{ key: CallerSigningKey; jkt: string }> | undefined;
  const signingKey = () =>
    imported ??= importCallerSigningKey(options.privateJwk, 'jwkCapabilityProofSigner').then(
      async (key) => ({ key, jkt: await capabilityKeyThumbprint(key.publicJwk) }),
    );

  return async ({ token, targetServiceId, abilityId }) => {
    const { key, jkt } = await signingKey();
    const bound = boundKeyThumbprint(token);
    if (bound !== jkt) {
      throw new CapabilityAuthError(
        bound === undefined
          ? 'The capability token is not bound to a key; no proof is needed'
          : 'The capability token is bound to another key than this signer holds',
        { status: 401, reason: 'proof_key_mismatch' },
      );
    }
    return await signCompactEs256(
      { alg: 'ES256', typ: CAPABILITY_PROOF_TYP, jwk: key.publicJwk },
      {
        ath: await tokenHashForProof(token),
        aud: targetServiceId,
        ab: abilityId,
        iat: Math.floor(now() / 1000),
        jti: crypto.randomUUID(),
      },
      key.privateKey,
    );
  };
}
