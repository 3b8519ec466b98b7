/**
 * The verified identity a service hands to ability handlers.
 *
 * @module
 */

/** The caller access class carried in the `spa` claim. */
export type CallerAccess = 'service' | 'plane';

/** A delegated principal (present only on delegated tokens). */
export interface DelegatedSubject {
  /** The delegated principal id (`sub` of a delegated token). */
  id: string;
  /** Application-owned principal kind (`spk`); absent means the legacy user principal. */
  kind?: string;
  /** Organization id (`spo`). */
  orgId?: string;
}

/** Key confirmation, set only after a matching proof of possession verified. */
export interface KeyConfirmation {
  /** RFC 7638 SHA-256 thumbprint of the caller's public JWK. */
  jkt: string;
}

/** What a service knows about its caller after `authenticate(token)` succeeded. */
export interface VerifiedIdentity {
  /** Always the acting / calling service (`act.sub` on delegated tokens, else `sub`). */
  serviceId: string;
  /** The target service id (`aud`). */
  audience: string;
  /** Granted scopes (`scp`). */
  scopes: string[];
  /** Token id (`jti`). */
  tokenId: string;
  /** The control-plane issuer (`iss`). */
  issuer: string;
  /** Expiry. */
  expiresAt: Date;
  /** Caller access class (`spa`, absent reads as `plane`). */
  callerAccess: CallerAccess;
  /** Present only on delegated tokens, always with `callerAccess: 'plane'`. */
  subject?: DelegatedSubject;
  /** Present only on brokered (ingress) tokens (`spb`). */
  brokerServiceId?: string;
  /** Present only after a verified proof of possession. */
  confirmation?: KeyConfirmation;
}

function frozenSubject(subject: DelegatedSubject): DelegatedSubject {
  return Object.freeze({ ...subject });
}

// Identities this module froze: freezing one again would only copy it.
const frozenIdentities = new WeakSet<VerifiedIdentity>();

/**
 * A deeply frozen copy of `identity`, for handing to handlers: every call of a session shares
 * one identity, so anything a handler could change in it would reach the calls after it.
 * `expiresAt` reads as a fresh `Date` each time, because freezing a `Date` leaves its setters
 * working. An identity this function returned comes back as it is.
 */
export function frozenIdentity(identity: VerifiedIdentity): VerifiedIdentity {
  if (frozenIdentities.has(identity)) return identity;
  const expiresAtMs = identity.expiresAt.getTime();
  const copy = {
    ...identity,
    scopes: Object.freeze([...identity.scopes]) as string[],
    ...(identity.subject !== undefined ? { subject: frozenSubject(identity.subject) } : {}),
    ...(identity.confirmation !== undefined
      ? { confirmation: Object.freeze({ ...identity.confirmation }) }
      : {}),
  };
  Object.defineProperty(copy, 'expiresAt', {
    get: () => new Date(expiresAtMs),
    enumerable: true,
    configurable: false,
  });
  const frozen = Object.freeze(copy);
  frozenIdentities.add(frozen);
  return frozen;
}
