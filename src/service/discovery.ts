/**
 * The service discovery document: what a service publishes at `/.well-known/svc/service.json`,
 * projected from its ability definitions. The validator the control plane runs on a document it
 * received lives in `discovery-parse.ts` (re-exported here) and the document's shape in
 * `discovery-document.ts`. Both sides apply the same rules, so whatever a service can publish the
 * plane accepts, and a document no definition could have produced is refused.
 *
 * @module
 */
import { effectiveMethodCeilingMs } from '../core/deadline.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { type AbilityDefinition, assertUniqueProjections, isDefinedAbility } from './ability.ts';
import { type CapabilityCatalog, checkCapabilityCatalog } from './capabilities.ts';
import { type MethodDefinition, methodJsonSchemas } from './method.ts';
import {
  type AbilityDiscoveryEntry,
  defineScopeEntry,
  type MethodDiscoveryEntry,
  type ServiceDiscoveryDocument,
} from './discovery-document.ts';

export type {
  AbilityDiscoveryEntry,
  DiscoveryRefusalReason,
  MethodDiscoveryEntry,
  ServiceDiscoveryDocument,
} from './discovery-document.ts';
export { parseServiceDiscoveryDocument } from './discovery-parse.ts';

/** Options of {@link abilityDiscoveryEntry}. */
export interface AbilityDiscoveryOptions {
  /** The service's `timeout.methodMs` (`false` = no service-wide ceiling). */
  serviceMethodCeilingMs?: number | false;
}

/** Options of {@link serviceDiscoveryDocument}. */
export interface ServiceDiscoveryOptions extends AbilityDiscoveryOptions {
  id: string;
  title: string;
  version: string;
  capabilities?: CapabilityCatalog;
  // deno-lint-ignore no-explicit-any
  abilities: readonly AbilityDefinition<any>[];
  ingress?: { brokerServiceId: string };
}

function methodEntry(
  method: MethodDefinition,
  options: AbilityDiscoveryOptions,
): MethodDiscoveryEntry {
  const schemas = methodJsonSchemas(method);
  const ceiling = method.stream ? undefined : effectiveMethodCeilingMs({
    ...(method.timeoutMs !== undefined ? { methodTimeoutMs: method.timeoutMs } : {}),
    ...(options.serviceMethodCeilingMs !== undefined
      ? { serviceMethodMs: options.serviceMethodCeilingMs }
      : {}),
    stream: false,
  });
  return {
    scopes: [...method.scopes],
    inputSchema: schemas.input,
    outputSchema: schemas.output,
    ...(method.stream ? { stream: true as const } : {}),
    ...(method.idempotent ? { idempotent: true as const } : {}),
    timeoutMs: ceiling ?? 0,
    ...(method.rest !== undefined ? { rest: { ...method.rest } } : {}),
    ...(method.mcp !== undefined ? { mcp: { ...method.mcp } } : {}),
    ...(method.mcpPrompt !== undefined ? { mcpPrompt: { ...method.mcpPrompt } } : {}),
    ...(method.mcpResource !== undefined ? { mcpResource: { ...method.mcpResource } } : {}),
    ...(method.description !== undefined ? { description: method.description } : {}),
  };
}

/**
 * The discovery entry of one ability: exposure, access, scopes, RPC path and transports, and per
 * method its scopes, JSON Schemas, `stream` / `idempotent` flags (present only when true), the
 * effective ceiling in ms (`0` when unbounded) and the REST / MCP projections.
 */
export function abilityDiscoveryEntry(
  // deno-lint-ignore no-explicit-any
  ability: AbilityDefinition<any>,
  options: AbilityDiscoveryOptions = {},
): AbilityDiscoveryEntry {
  if (!isDefinedAbility(ability)) {
    throw new SvcConfigurationError(
      'abilityDiscoveryEntry: the ability was not created by defineAbility',
      {
        reason: 'invalid_ability',
      },
    );
  }
  const methods: Record<string, MethodDiscoveryEntry> = {};
  for (
    const [name, method] of Object.entries(ability.methods as Record<string, MethodDefinition>)
  ) {
    methods[name] = methodEntry(method, options);
  }
  return {
    id: ability.id,
    ...(ability.title !== undefined ? { title: ability.title } : {}),
    ...(ability.description !== undefined ? { description: ability.description } : {}),
    exposure: ability.exposure,
    access: ability.access,
    scopes: [...ability.scopes],
    rpc: { path: ability.rpc.path, transports: [...ability.rpc.transports] },
    methods,
  };
}

function catalogEntry(
  given: CapabilityCatalog,
  serviceId: string,
): NonNullable<ServiceDiscoveryDocument['capabilities']> {
  // Nothing makes a caller pass defineCapabilities' output, and the plane refuses a whole
  // document over one bad scope: check here what is about to be published.
  const catalog = checkCapabilityCatalog(given, `service ${serviceId} capabilities`);
  if (catalog.serviceId !== undefined && catalog.serviceId !== serviceId) {
    throw new SvcConfigurationError(
      `service ${serviceId}: capabilities.serviceId is "${catalog.serviceId}", not "${serviceId}"`,
      { reason: 'capabilities_service_mismatch' },
    );
  }
  const scopes: Record<string, { description?: string }> = {};
  for (const [name, scope] of Object.entries(catalog.scopes ?? {})) {
    defineScopeEntry(scopes, name, scope.description);
  }
  return {
    ...(catalog.serviceId !== undefined ? { serviceId: catalog.serviceId } : {}),
    ...(catalog.scopes !== undefined ? { scopes } : {}),
  };
}

/**
 * The discovery document of a service. Checks that every ability belongs to the service and
 * that projections are unique ({@link assertUniqueProjections}), that a catalog passes the rules
 * of `defineCapabilities`, and that its `serviceId` (when present) is the service id. Compute it
 * once per service and cache it.
 */
export function serviceDiscoveryDocument(
  options: ServiceDiscoveryOptions,
): ServiceDiscoveryDocument {
  for (const field of ['id', 'title', 'version'] as const) {
    if (typeof options[field] !== 'string' || options[field].length === 0) {
      throw new SvcConfigurationError(
        `serviceDiscoveryDocument: ${field} must be a non-empty string`,
        {
          reason: 'invalid_service',
        },
      );
    }
  }
  assertUniqueProjections(options.abilities, options.id);
  const brokerServiceId = options.ingress?.brokerServiceId;
  if (
    options.ingress !== undefined && (typeof brokerServiceId !== 'string' || brokerServiceId === '')
  ) {
    throw new SvcConfigurationError(
      `service ${options.id}: ingress.brokerServiceId must be a non-empty string`,
      { reason: 'invalid_service' },
    );
  }
  const entryOptions: AbilityDiscoveryOptions = options.serviceMethodCeilingMs !== undefined
    ? { serviceMethodCeilingMs: options.serviceMethodCeilingMs }
    : {};
  return {
    id: options.id,
    title: options.title,
    version: options.version,
    ...(options.capabilities !== undefined
      ? { capabilities: catalogEntry(options.capabilities, options.id) }
      : {}),
    ...(brokerServiceId !== undefined
      ? { ingress: { required: true as const, brokerServiceId } }
      : {}),
    abilities: options.abilities.map((ability) => abilityDiscoveryEntry(ability, entryOptions)),
  };
}
