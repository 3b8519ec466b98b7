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

/** Lets a subclass constructor install its private fields on an object it did not create. */
class ObjectStamp {
  constructor(target: object) {
    return target;
  }
}

/**
 * Holds a handler's registration in a private field installed on the handler object itself:
 * invisible to the handler, to reflection and to RPC, and an order of magnitude cheaper than a
 * `WeakMap` entry, which matters because every call registers a fresh handler object.
 */
class RegistrationStamp extends ObjectStamp {
  #registration: HandlerRegistration;

  private constructor(handler: object, registration: HandlerRegistration) {
    super(handler);
    this.#registration = registration;
  }

  /** Stamps `handler`; `false` when the runtime refuses (a non-extensible object, some day). */
  static stamp(handler: object, registration: HandlerRegistration): boolean {
    try {
      new RegistrationStamp(handler, registration);
      return true;
    } catch {
      return false;
    }
  }

  static of(handler: object): HandlerRegistration | undefined {
    return #registration in handler ? (handler as RegistrationStamp).#registration : undefined;
  }
}

// Only for objects a private field cannot be installed on.
const unstampable = new WeakMap<object, HandlerRegistration>();

function registrationOf(handler: object): HandlerRegistration | undefined {
  return RegistrationStamp.of(handler) ?? unstampable.get(handler);
}

/**
 * Records the identity of the call a handler object was created for. Called by the wrapper,
 * once per call, right after the handler factory returned. A factory that returns the same
 * object for several calls makes that object ambiguous, and `requireScopes` then refuses it.
 */
export function registerHandlerIdentity(handler: object, identity: VerifiedIdentity): void {
  const existing = registrationOf(handler);
  if (existing !== undefined) {
    existing.shared = true;
    return;
  }
  const registration = { identity, shared: false };
  if (!RegistrationStamp.stamp(handler, registration)) unstampable.set(handler, registration);
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

/** Runs on every call: a scan of the (short) granted list, with no allocation. */
function grantsAll(granted: readonly string[], required: readonly string[]): boolean {
  for (let i = 0; i < required.length; i++) {
    if (!granted.includes(required[i])) return false;
  }
  return true;
}

/** Throws `CapabilityAuthError` 403 `missing_scope` when `granted` lacks any of `required`. */
export function assertScopes(
  granted: readonly string[],
  required: readonly string[],
  label: string,
): void {
  if (grantsAll(granted, required)) return;
  const missing = missingScopes(granted, required);
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
      ? registrationOf(handler)
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
  assertScopes(registration.identity.scopes, scopes, 'requireScopes');
  return registration.identity;
}
