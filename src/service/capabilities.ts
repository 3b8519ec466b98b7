/**
 * The capability catalog a service publishes: the scopes it understands, each with an optional
 * description, and optionally the service id it belongs to (the plane refuses a discovery
 * document whose catalog names another service).
 *
 * @module
 */
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { scopeNameProblem } from './identifiers.ts';

/** One scope of a capability catalog. */
export interface CapabilityScope {
  /** Human-readable description of what the scope allows. */
  readonly description?: string;
}

/** A validated, frozen capability catalog. */
export interface CapabilityCatalog {
  /** The service this catalog belongs to; must equal the service id when present. */
  readonly serviceId?: string;
  /** Scope names mapped to their descriptions. */
  readonly scopes?: Readonly<Record<string, CapabilityScope>>;
}

/** What {@link defineCapabilities} accepts. */
export interface CapabilityCatalogOptions {
  /** The service this catalog belongs to; when given, it must equal the service id. */
  serviceId?: string;
  /** Scope names (non-empty, no whitespace or control characters) mapped to their descriptions. */
  scopes?: Record<string, { description?: string }>;
}

const CATALOG_FIELDS: readonly string[] = ['serviceId', 'scopes'];
const SCOPE_FIELDS: readonly string[] = ['description'];
const FIELD_REFUSAL = { noun: 'field', reason: 'invalid_capabilities' } as const;

function refuse(label: string, field: string, problem: string): never {
  throw new SvcConfigurationError(`${label}: ${field} ${problem}`, {
    reason: 'invalid_capabilities',
  });
}

function checkScope(label: string, name: string, value: unknown): CapabilityScope {
  const problem = scopeNameProblem(name);
  if (problem !== undefined) refuse(label, `scope ${JSON.stringify(name)}`, problem);
  const field = `scopes[${JSON.stringify(name)}]`;
  if (!isPlainObject(value)) refuse(label, field, 'must be an object');
  refuseUnknownKeys(value, SCOPE_FIELDS, `${label}: ${field}`, FIELD_REFUSAL);
  if (value.description !== undefined && typeof value.description !== 'string') {
    refuse(label, `${field}.description`, 'must be a string');
  }
  return Object.freeze(value.description !== undefined ? { description: value.description } : {});
}

function checkScopes(label: string, value: unknown): Readonly<Record<string, CapabilityScope>> {
  if (!isPlainObject(value)) refuse(label, 'scopes', 'must be an object mapping scope names');
  // No prototype, so a scope named `__proto__` is an ordinary key like any other.
  const scopes: Record<string, CapabilityScope> = Object.create(null);
  for (const [name, scope] of Object.entries(value)) scopes[name] = checkScope(label, name, scope);
  return Object.freeze(scopes);
}

/**
 * Validates a capability catalog and returns a frozen copy; a problem is a
 * `SvcConfigurationError` whose message starts with `label`. A service checks its catalog with
 * this even when it did not come from {@link defineCapabilities}, so it never publishes one the
 * plane would refuse.
 */
export function checkCapabilityCatalog(catalog: unknown, label: string): CapabilityCatalog {
  if (!isPlainObject(catalog)) {
    refuse(label, 'catalog', 'must be an object { serviceId?, scopes? }');
  }
  refuseUnknownKeys(catalog, CATALOG_FIELDS, label, FIELD_REFUSAL);
  if (
    catalog.serviceId !== undefined &&
    (typeof catalog.serviceId !== 'string' || catalog.serviceId.length === 0)
  ) {
    refuse(label, 'serviceId', 'must be a non-empty string');
  }
  return Object.freeze({
    ...(catalog.serviceId !== undefined ? { serviceId: catalog.serviceId as string } : {}),
    ...(catalog.scopes !== undefined ? { scopes: checkScopes(label, catalog.scopes) } : {}),
  });
}

/**
 * Validates a capability catalog and returns a frozen copy. Scope names must be non-empty and
 * free of whitespace and control characters; `serviceId`, when present, a non-empty string.
 * Unknown fields are refused so a misspelt field cannot silently publish nothing.
 */
export function defineCapabilities(catalog: CapabilityCatalogOptions): CapabilityCatalog {
  return checkCapabilityCatalog(catalog, 'defineCapabilities');
}
