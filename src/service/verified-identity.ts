/**
 * The identity handed to handlers for verified token claims, built and frozen once per claims
 * object rather than once per request.
 *
 * `verifyCapabilityClaims` answers a token it verified before with the very claims object it
 * answered with then, so every HTTP batch presenting one token shares one frozen identity. An
 * entry lives exactly as long as that claims object: the verified-token cache (bounded, and never
 * holding a token past its expiry) decides, and a token verified afresh gets a fresh identity.
 * Nothing here decides whether a token is accepted; every check still runs on every request.
 *
 * @module
 */
import { frozenIdentity, type VerifiedIdentity } from '../core/identity.ts';
import { type CapabilityTokenClaims, identityFromClaims } from '../core/token-claims.ts';

interface IdentitiesOfClaims {
  /** The identity without key confirmation. */
  readonly plain: VerifiedIdentity;
  /** The identity with `confirmation`, built once a proof for a bound token verified. */
  confirmed?: VerifiedIdentity;
}

const identitiesByClaims = new WeakMap<CapabilityTokenClaims, IdentitiesOfClaims>();

function identitiesOf(claims: CapabilityTokenClaims): IdentitiesOfClaims {
  let identities = identitiesByClaims.get(claims);
  if (identities === undefined) {
    identities = { plain: frozenIdentity(identityFromClaims(claims)) };
    identitiesByClaims.set(claims, identities);
  }
  return identities;
}

/** The frozen identity of verified claims, without key confirmation. */
export function verifiedIdentityOf(claims: CapabilityTokenClaims): VerifiedIdentity {
  return identitiesOf(claims).plain;
}

/**
 * The frozen identity of verified claims of a bound token, carrying `confirmation`. Only for a
 * request whose proof of possession verified against `claims.cnf.jkt`.
 */
export function confirmedIdentityOf(
  claims: CapabilityTokenClaims & { cnf: { jkt: string } },
): VerifiedIdentity {
  const identities = identitiesOf(claims);
  identities.confirmed ??= frozenIdentity({
    ...identityFromClaims(claims),
    confirmation: { jkt: claims.cnf.jkt },
  });
  return identities.confirmed;
}
