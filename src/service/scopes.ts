/**
 * Scope checks. The wrapper checks every method's scopes before a handler exists; a handler
 * may re-check with `requireScopes(this, ...)`, which also hands it the caller's identity.
 *
 * Matching is exact and case-sensitive: `*`, `svc-a.*`, a different case or a trailing space
 * grant nothing, because a scope is a name, not a pattern.
 *
 * @module
 */
import { CapabilityAuthError, SvcInternalError } from '../core/errors.ts';
import type { VerifiedIdentity } from '../core/identity.ts';

interface HandlerRegistration {
  identity: VerifiedIdentity;
  /** Set when one object was returned for two calls: whose identity it carries is unknowable. */
  shared: boolean;
}

const registrations = new WeakMap<object, HandlerRegistration>();

/**
 * Records the identity of the call a handler object was created for. Called by the wrapper,
 * once per call, right after the handler factory returned. A factory that returns the same
 * object for several calls makes that object ambiguous, and `requireScopes` then refuses it.
 */
export function registerHandlerIdentity(handler: object, identity: VerifiedIdentity): void {
  const existing = registrations.get(handler);
  if (existing === undefined) registrations.set(handler, { identity, shared: false });
  else existing.shared = true;
}

/** The required scopes that `granted` lacks, in order and without repeats. Exact matching. */
export function missingScopes(granted: readonly string[], required: readonly string[]): string[] {
  const have = new Set(granted);
  const missing: string[] = [];
  for (const scope of required) {
    if (!have.has(scope) && !missing.includes(scope)) missing.push(scope);
  }
  return missing;
}

/** Throws `CapabilityAuthError` 403 `missing_scope` when `identity` lacks any of `required`. */
export function assertScopes(
  identity: VerifiedIdentity,
  required: readonly string[],
  label: string,
): void {
  const missing = missingScopes(identity.scopes, required);
  if (missing.length > 0) {
    throw new CapabilityAuthError(`${label}: missing scope ${missing.join(', ')}`, {
      status: 403,
      reason: 'missing_scope',
    });
  }
}

/**
 * Returns the verified identity of the call `handler` was created for, after checking that it
 * carries every scope given. Pass the handler object (`this` inside a method).
 *
 * Throws `CapabilityAuthError` 403 `missing_scope` when a scope is missing, and
 * `SvcInternalError` when the object was not created by the ability wrapper for a call, or was
 * returned by its factory for more than one call (a factory must build a fresh object per call).
 */
export function requireScopes(handler: object, ...scopes: string[]): VerifiedIdentity {
  const registration =
    handler !== null && (typeof handler === 'object' || typeof handler === 'function')
      ? registrations.get(handler)
      : undefined;
  if (registration === undefined) {
    throw new SvcInternalError('requireScopes: not a handler object created for an ability call', {
      reason: 'unknown_handler',
    });
  }
  if (registration.shared) {
    throw new SvcInternalError(
      'requireScopes: the handler factory returned this object for more than one call; ' +
        'return a fresh object per call',
      { reason: 'shared_handler' },
    );
  }
  assertScopes(registration.identity, scopes, 'requireScopes');
  return registration.identity;
}
