/**
 * The grant check run on every issuance: which scopes a target publishes, which of them its
 * endpoint configuration grants to a caller, and whether a requested ability exists.
 *
 * Refusals are `CapabilityAuthError` 403 with a reason naming the failed check and a message
 * naming the scope (or ability) and the target, so a caller refused for one target learns which
 * request was wrong without anything about other targets.
 *
 * @module
 */
import { CapabilityAuthError } from '../core/errors.ts';
import type { ServiceDiscoveryDocument } from '../service/discovery.ts';
import { isWildcardScope, scopeNameProblem } from '../service/identifiers.ts';
import type { ResolvedTarget } from './catalog.ts';

export { isWildcardScope } from '../service/identifiers.ts';

// Scope names that passed the checks below: the checks read nothing but the name, so a name seen
// before passes again without them. Bounded: a flood of distinct names costs re-checks, never
// memory.
const wellFormedScopes = new Set<unknown>();
const MAX_WELL_FORMED_SCOPES = 1024;

/**
 * Sorts and de-duplicates requested scopes. An entry that is not a usable scope name (not a
 * string, empty, whitespace or control characters) is refused with reason `invalid_scope`; a
 * wildcard such as `*` or `svc-a.*` with reason `unknown_scope`, because no target publishes
 * patterns. An empty list stays empty: the issuer decides whether it accepts one.
 */
export function normalizeScopes(scopes: readonly string[]): string[] {
  if (!Array.isArray(scopes)) {
    throw new CapabilityAuthError('Scopes must be an array of scope names', {
      status: 403,
      reason: 'invalid_scope',
    });
  }
  for (const scope of scopes) {
    if (wellFormedScopes.has(scope)) continue;
    const problem = scopeNameProblem(scope);
    if (problem !== undefined) {
      throw new CapabilityAuthError(`Invalid scope: a scope ${problem}`, {
        status: 403,
        reason: 'invalid_scope',
      });
    }
    if (isWildcardScope(scope)) {
      throw new CapabilityAuthError(
        `Unknown capability scope "${scope}": wildcard scopes are not supported`,
        { status: 403, reason: 'unknown_scope' },
      );
    }
    if (wellFormedScopes.size >= MAX_WELL_FORMED_SCOPES) wellFormedScopes.clear();
    wellFormedScopes.add(scope);
  }
  // Code-unit order, not locale order: the result feeds cache keys and must be stable everywhere.
  // Callers that normalized once (the requesters, a repeated request) send the scopes in that
  // order already: a list in strictly increasing order is its own normal form and is only copied.
  if (isStrictlyIncreasing(scopes)) return scopes.slice();
  return [...new Set(scopes)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function isStrictlyIncreasing(scopes: readonly string[]): boolean {
  for (let i = 1; i < scopes.length; i++) if (!(scopes[i - 1] < scopes[i])) return false;
  return true;
}

/**
 * Every scope a discovery document publishes: each ability's scopes, each method's scopes and
 * the scopes named by the service's capability catalog.
 */
export function publishedScopes(document: ServiceDiscoveryDocument): Set<string> {
  const published = new Set<string>();
  const addAll = (scopes: unknown): void => {
    if (!Array.isArray(scopes)) return;
    for (const scope of scopes) if (typeof scope === 'string') published.add(scope);
  };
  for (const ability of document.abilities) {
    addAll(ability.scopes);
    for (const method of Object.values(ability.methods)) addAll(method.scopes);
  }
  const catalogScopes = document.capabilities?.scopes;
  if (catalogScopes !== undefined && catalogScopes !== null && typeof catalogScopes === 'object') {
    for (const scope of Object.keys(catalogScopes)) published.add(scope);
  }
  return published;
}

/** The scopes an endpoint's configuration grants to one caller (empty when it grants none). */
export function grantedScopes(
  target: Pick<ResolvedTarget, 'endpoint'>,
  callerServiceId: string,
): Set<string> {
  const granted = new Set<string>();
  for (const grant of target.endpoint.grants) {
    if (grant.caller === callerServiceId) { for (const scope of grant.scopes) granted.add(scope); }
  }
  return granted;
}

// Accepted documents and built endpoints are frozen: what they publish and grant cannot change,
// so the sets the grant check reads on every mint are built once per document and endpoint. Only
// frozen objects are remembered, and an object cannot be unfrozen, so one found here needs no
// second look.
const publishedSets = new WeakMap<object, ReadonlySet<string>>();
const grantedSets = new WeakMap<object, Map<string, ReadonlySet<string>>>();

function publishedScopeSet(document: ServiceDiscoveryDocument): ReadonlySet<string> {
  let published = publishedSets.get(document);
  if (published !== undefined) return published;
  published = publishedScopes(document);
  if (Object.isFrozen(document)) publishedSets.set(document, published);
  return published;
}

function grantedScopeSet(target: ResolvedTarget, callerServiceId: string): ReadonlySet<string> {
  const endpoint = target.endpoint;
  let byCaller = grantedSets.get(endpoint);
  if (byCaller === undefined) {
    if (!Object.isFrozen(endpoint) || !Object.isFrozen(endpoint.grants)) {
      return grantedScopes(target, callerServiceId);
    }
    byCaller = new Map();
    grantedSets.set(endpoint, byCaller);
  }
  let granted = byCaller.get(callerServiceId);
  if (granted === undefined) {
    granted = grantedScopes(target, callerServiceId);
    // Bounded by the configured callers: only a caller a grant names is remembered.
    if (granted.size > 0) byCaller.set(callerServiceId, granted);
  }
  return granted;
}

const abilityIdSets = new WeakMap<object, ReadonlySet<string>>();

function declaredAbilityIds(document: ServiceDiscoveryDocument): ReadonlySet<string> {
  let ids = abilityIdSets.get(document);
  if (ids !== undefined) return ids;
  ids = new Set(document.abilities.map((ability) => ability.id));
  if (Object.isFrozen(document)) abilityIdSets.set(document, ids);
  return ids;
}

function requireAbility(target: ResolvedTarget, abilityId: string): void {
  if (!declaredAbilityIds(target.document).has(abilityId)) {
    throw new CapabilityAuthError(
      `Unknown ability "${abilityId}" on service "${target.endpoint.id}"`,
      { status: 403, reason: 'unknown_ability' },
    );
  }
}

/**
 * The full grant check for one issuance, in order: the scopes are well formed (see
 * {@link normalizeScopes}); every scope is published by the target (else 403 `unknown_scope`);
 * every scope is granted to the caller by the target's endpoint configuration (else 403
 * `grant_denied`); and, when an ability is named, the target's document declares it (else 403
 * `unknown_ability`). Returns nothing: passing is the absence of a throw.
 */
export function checkGrant(
  target: ResolvedTarget,
  callerServiceId: string,
  scopes: readonly string[],
  abilityId?: string,
): void {
  checkNormalizedGrant(target, callerServiceId, normalizeScopes(scopes), abilityId);
}

/**
 * {@link checkGrant} for scopes that already went through {@link normalizeScopes} (the issuer
 * normalizes once and signs what it checked).
 */
export function checkNormalizedGrant(
  target: ResolvedTarget,
  callerServiceId: string,
  requested: readonly string[],
  abilityId?: string,
): void {
  const targetId = target.endpoint.id;
  const published = publishedScopeSet(target.document);
  for (const scope of requested) {
    if (!published.has(scope)) {
      throw new CapabilityAuthError(
        `Unknown capability scope "${scope}" for service "${targetId}"`,
        { status: 403, reason: 'unknown_scope' },
      );
    }
  }
  const granted = grantedScopeSet(target, callerServiceId);
  for (const scope of requested) {
    if (!granted.has(scope)) {
      throw new CapabilityAuthError(
        `Scope "${scope}" of service "${targetId}" is not granted to caller "${callerServiceId}"`,
        { status: 403, reason: 'grant_denied' },
      );
    }
  }
  if (abilityId !== undefined) requireAbility(target, abilityId);
}
