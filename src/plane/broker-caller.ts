/**
 * The broker caller (`svcCaller`): who the plane acts for, as invocation middleware or trusted
 * application code names it, and the token shape it maps to (contract: Broker caller).
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import type { DelegatedSubject } from '../core/identity.ts';
import { isPrincipalKindTooLong, MAX_PRINCIPAL_KIND_LENGTH } from '../core/token-claims.ts';
import type { ResolvedTarget } from './catalog.ts';

/** The broker caller: who the plane is acting for (set by invocation middleware or app code). */
export interface BrokerCaller {
  /**
   * Who the caller is: for `kind: 'user'` the delegated principal (`sub`, `subject.id`); for
   * `kind: 'service'` the service the token is issued to (`sub`).
   */
  id: string;
  /** `service` only for callers the plane proved to be services; everything else is `user`. */
  kind: 'service' | 'user';
  /** The principal's organization id (`spo`, `subject.orgId`); user-class callers only. */
  orgId?: string;
  /**
   * Application-owned principal category (`api_key`, `automation`...; `spk`, `subject.kind`), at
   * most 512 characters; user-class callers only. Never changes access.
   */
  principalKind?: string;
}

const CALLER_FIELDS: readonly string[] = ['id', 'kind', 'orgId', 'principalKind'];

function text(value: unknown, field: string, label: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new SvcConfigurationError(`${label}: \`${field}\` must be a non-empty string`);
  }
  return value;
}

/**
 * Validates a broker caller; `orgId` and `principalKind` belong to user-class callers only. A
 * field beyond those is refused: a misspelt `orgID` would otherwise mint the subject without
 * its organisation.
 */
export function validateBrokerCaller(caller: unknown, label: string): BrokerCaller {
  if (caller === null || typeof caller !== 'object' || Array.isArray(caller)) {
    throw new SvcConfigurationError(
      `${label}: caller must be { id, kind, orgId?, principalKind? }`,
    );
  }
  refuseUnknownKeys(caller, CALLER_FIELDS, `${label}: \`caller\``, { noun: 'field' });
  const record = caller as Record<string, unknown>;
  const id = text(record.id, 'caller.id', label);
  if (record.kind !== 'service' && record.kind !== 'user') {
    throw new SvcConfigurationError(`${label}: caller.kind must be 'service' or 'user'`);
  }
  const checked: BrokerCaller = { id, kind: record.kind };
  if (record.orgId !== undefined) {
    // A service caller's token carries no subject, so an org would be dropped unseen.
    if (record.kind === 'service') {
      throw new SvcConfigurationError(`${label}: a service caller carries no orgId`);
    }
    checked.orgId = text(record.orgId, 'caller.orgId', label);
  }
  if (record.principalKind !== undefined) {
    const kind = text(record.principalKind, 'caller.principalKind', label);
    if (isPrincipalKindTooLong(kind)) {
      throw new SvcConfigurationError(
        `${label}: caller.principalKind exceeds ${MAX_PRINCIPAL_KIND_LENGTH} characters`,
      );
    }
    if (record.kind === 'service') {
      throw new SvcConfigurationError(`${label}: a service caller carries no principalKind`);
    }
    checked.principalKind = kind;
  }
  return checked;
}

/** The token shape a broker caller maps to (contract: Broker caller mapping). */
export function tokenShapeForCaller(caller: BrokerCaller | undefined, planeServiceId: string): {
  callerServiceId: string;
  callerAccess: 'service' | 'plane';
  subject?: DelegatedSubject;
} {
  if (caller === undefined) return { callerServiceId: planeServiceId, callerAccess: 'plane' };
  if (caller.kind === 'service') return { callerServiceId: caller.id, callerAccess: 'service' };
  const subject: DelegatedSubject = { id: caller.id };
  if (caller.principalKind !== undefined) subject.kind = caller.principalKind;
  if (caller.orgId !== undefined) subject.orgId = caller.orgId;
  return { callerServiceId: planeServiceId, callerAccess: 'plane', subject };
}

/** Refuses a non-service caller for a service-only ability, from the catalog, before minting. */
export function checkCatalogAccess(
  target: ResolvedTarget,
  abilityId: string,
  callerAccess: 'service' | 'plane',
): void {
  const ability = target.document.abilities.find((entry) => entry.id === abilityId);
  if (ability === undefined) {
    throw new CapabilityAuthError(`Unknown ability ${abilityId} on ${target.endpoint.id}`, {
      status: 403,
      reason: 'unknown_ability',
    });
  }
  if (ability.access === 'service' && callerAccess !== 'service') {
    throw new CapabilityAuthError(`Ability ${abilityId} is restricted to service callers`, {
      status: 403,
      reason: 'access_class_mismatch',
    });
  }
}
