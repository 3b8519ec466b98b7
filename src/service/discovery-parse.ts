/**
 * The validator the control plane runs on a discovery document it received: the same rules a
 * service applies when it projects its own, so whatever a service can publish the plane accepts,
 * and a document no definition could have produced is refused.
 *
 * @module
 */
import { isPlainObject } from '../core/config-values.ts';
import { MAX_METHOD_TIMEOUT_MS } from '../core/deadline.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import type { JsonSchema } from '../core/schema.ts';
import { ABILITY_TRANSPORTS } from './ability.ts';
import {
  isAbilityId,
  isAbilityOfService,
  methodNameProblem,
  rpcPathProblem,
  scopeNameProblem,
} from './identifiers.ts';
import {
  checkMcpPrompt,
  checkMcpResource,
  checkMcpTool,
  mcpProjectionKeys,
} from './mcp-projection.ts';
import { parseRestPath, REST_METHODS, restRouteKey, restVariableProblem } from './rest-path.ts';
import {
  type AbilityDiscoveryEntry,
  defineScopeEntry,
  type DiscoveryRefusalReason,
  type MethodDiscoveryEntry,
  type ServiceDiscoveryDocument,
} from './discovery-document.ts';

function refuseDocument(
  serviceId: string,
  where: string,
  problem: string,
  reason: DiscoveryRefusalReason = 'discovery_malformed',
): never {
  throw new SvcConfigurationError(
    `discovery document of ${serviceId}: ${where} ${problem}`,
    { reason },
  );
}

/** Reads received fields one by one; unknown fields are dropped (newer services may add some). */
class DocumentReader {
  constructor(readonly serviceId: string) {}

  object(value: unknown, where: string): Record<string, unknown> {
    if (!isPlainObject(value)) refuseDocument(this.serviceId, where, 'must be an object');
    return value;
  }

  text(value: unknown, where: string): string {
    if (typeof value !== 'string') refuseDocument(this.serviceId, where, 'must be a string');
    return value;
  }

  optionalText(value: unknown, where: string): string | undefined {
    return value === undefined ? undefined : this.text(value, where);
  }

  oneOf<T extends string>(value: unknown, allowed: readonly T[], where: string): T {
    if (!(allowed as readonly unknown[]).includes(value)) {
      refuseDocument(this.serviceId, where, `must be one of ${allowed.join(', ')}`);
    }
    return value as T;
  }

  trueFlag(value: unknown, where: string): true | undefined {
    if (value !== undefined && value !== true) {
      refuseDocument(this.serviceId, where, 'must be `true` when present');
    }
    return value as true | undefined;
  }

  scopes(value: unknown, where: string): string[] {
    if (!Array.isArray(value)) refuseDocument(this.serviceId, where, 'must be an array');
    for (const scope of value) {
      const problem = scopeNameProblem(scope);
      if (problem !== undefined) refuseDocument(this.serviceId, `${where} entry`, problem);
    }
    return [...value] as string[];
  }
}

function readRest(
  reader: DocumentReader,
  value: unknown,
  inputSchema: JsonSchema,
  where: string,
): NonNullable<MethodDiscoveryEntry['rest']> {
  const rest = reader.object(value, where);
  const method = reader.oneOf(rest.method, REST_METHODS, `${where}.method`);
  const template = parseRestPath(rest.path);
  if (typeof template === 'string') refuseDocument(reader.serviceId, `${where}.path`, template);
  const problem = restVariableProblem(template.variables, inputSchema);
  if (problem !== undefined) {
    refuseDocument(reader.serviceId, `${where}.path`, problem, 'discovery_rest_variable');
  }
  const status = rest.status;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 299) {
    refuseDocument(reader.serviceId, `${where}.status`, 'must be an integer from 200 to 299');
  }
  return { method, path: rest.path as string, status };
}

function fieldRefusal(reader: DocumentReader, where: string) {
  return (field: string, problem: string): never =>
    refuseDocument(reader.serviceId, `${where}.${field}`, problem);
}

function readTimeoutMs(reader: DocumentReader, value: unknown, where: string): number {
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 0 ||
    value > MAX_METHOD_TIMEOUT_MS
  ) {
    refuseDocument(
      reader.serviceId,
      where,
      'must be a non-negative integer number of milliseconds',
    );
  }
  return value;
}

function readMethod(reader: DocumentReader, value: unknown, where: string): MethodDiscoveryEntry {
  const method = reader.object(value, where);
  const inputSchema = reader.object(method.inputSchema, `${where}.inputSchema`);
  const outputSchema = reader.object(method.outputSchema, `${where}.outputSchema`);
  const stream = reader.trueFlag(method.stream, `${where}.stream`);
  const idempotent = reader.trueFlag(method.idempotent, `${where}.idempotent`);
  if (stream && method.rest !== undefined) {
    refuseDocument(
      reader.serviceId,
      `${where}.rest`,
      'cannot project a streaming method (REST r6)',
    );
  }
  const rest = method.rest === undefined
    ? undefined
    : readRest(reader, method.rest, inputSchema, `${where}.rest`);
  const refuseField = fieldRefusal(reader, where);
  for (const field of ['mcpPrompt', 'mcpResource'] as const) {
    if (stream && method[field] !== undefined) {
      refuseField(field, 'cannot project a streaming method (REST r6)');
    }
  }
  const mcp = method.mcp === undefined ? undefined : checkMcpTool(method.mcp, refuseField);
  const mcpPrompt = method.mcpPrompt === undefined
    ? undefined
    : checkMcpPrompt(method.mcpPrompt, refuseField);
  const mcpResource = method.mcpResource === undefined
    ? undefined
    : checkMcpResource(method.mcpResource, inputSchema, refuseField);
  const description = reader.optionalText(method.description, `${where}.description`);
  return {
    scopes: reader.scopes(method.scopes, `${where}.scopes`),
    inputSchema,
    outputSchema,
    ...(stream ? { stream } : {}),
    ...(idempotent ? { idempotent } : {}),
    timeoutMs: readTimeoutMs(reader, method.timeoutMs, `${where}.timeoutMs`),
    ...(rest !== undefined ? { rest } : {}),
    ...(mcp !== undefined ? { mcp: { ...mcp } } : {}),
    ...(mcpPrompt !== undefined ? { mcpPrompt: { ...mcpPrompt } } : {}),
    ...(mcpResource !== undefined ? { mcpResource: { ...mcpResource } } : {}),
    ...(description !== undefined ? { description } : {}),
  };
}

function readRpc(
  reader: DocumentReader,
  value: unknown,
  where: string,
): AbilityDiscoveryEntry['rpc'] {
  const rpc = reader.object(value, where);
  const problem = rpcPathProblem(rpc.path);
  if (problem !== undefined) refuseDocument(reader.serviceId, `${where}.path`, problem);
  if (!Array.isArray(rpc.transports) || rpc.transports.length === 0) {
    refuseDocument(reader.serviceId, `${where}.transports`, 'must be a non-empty array');
  }
  const transports = rpc.transports.map((transport: unknown) =>
    reader.oneOf(transport, ABILITY_TRANSPORTS, `${where}.transports entry`)
  );
  return { path: rpc.path as string, transports };
}

function readMethods(
  reader: DocumentReader,
  value: unknown,
  where: string,
): Record<string, MethodDiscoveryEntry> {
  const received = reader.object(value, where);
  const names = Object.keys(received);
  if (names.length === 0) {
    refuseDocument(reader.serviceId, where, 'must declare at least one method');
  }
  const methods: Record<string, MethodDiscoveryEntry> = {};
  for (const name of names) {
    const problem = methodNameProblem(name);
    if (problem !== undefined) {
      refuseDocument(
        reader.serviceId,
        `${where} name ${JSON.stringify(name.slice(0, 64))}`,
        problem,
      );
    }
    methods[name] = readMethod(reader, received[name], `${where}["${name}"]`);
  }
  return methods;
}

function readAbility(reader: DocumentReader, value: unknown, index: number): AbilityDiscoveryEntry {
  const where = `abilities[${index}]`;
  const ability = reader.object(value, where);
  if (!isAbilityId(ability.id) || !isAbilityOfService(ability.id, reader.serviceId)) {
    refuseDocument(
      reader.serviceId,
      `${where}.id`,
      `must be an ability id of the form "${reader.serviceId}.<name>"`,
      isAbilityId(ability.id) ? 'discovery_service_mismatch' : 'discovery_malformed',
    );
  }
  const label = `ability ${ability.id}`;
  const title = reader.optionalText(ability.title, `${label} title`);
  const description = reader.optionalText(ability.description, `${label} description`);
  const rpc = readRpc(reader, ability.rpc, `${label} rpc`);
  const methods = readMethods(reader, ability.methods, `${label} methods`);
  const streaming = Object.keys(methods).find((name) => methods[name].stream);
  if (
    streaming !== undefined &&
    !rpc.transports.some((transport) => transport !== 'http-batch')
  ) {
    refuseDocument(
      reader.serviceId,
      `${label} method "${streaming}"`,
      'streams over http-batch only',
    );
  }
  return {
    id: ability.id,
    ...(title !== undefined ? { title } : {}),
    ...(description !== undefined ? { description } : {}),
    exposure: reader.oneOf(ability.exposure, ['private', 'published'], `${label} exposure`),
    access: reader.oneOf(ability.access, ['plane', 'service'], `${label} access`),
    scopes: reader.scopes(ability.scopes, `${label} scopes`),
    rpc,
    methods,
  };
}

function readCapabilities(
  reader: DocumentReader,
  value: unknown,
): NonNullable<ServiceDiscoveryDocument['capabilities']> {
  const catalog = reader.object(value, 'capabilities');
  if (catalog.serviceId !== undefined && catalog.serviceId !== reader.serviceId) {
    refuseDocument(
      reader.serviceId,
      'capabilities.serviceId',
      'does not equal the configured service id',
      'discovery_service_mismatch',
    );
  }
  if (catalog.scopes === undefined) {
    return catalog.serviceId !== undefined ? { serviceId: reader.serviceId } : {};
  }
  const received = reader.object(catalog.scopes, 'capabilities.scopes');
  const scopes: Record<string, { description?: string }> = {};
  for (const [name, scope] of Object.entries(received)) {
    const problem = scopeNameProblem(name);
    if (problem !== undefined) {
      refuseDocument(reader.serviceId, 'capabilities.scopes name', problem);
    }
    const entry = reader.object(scope, `capabilities.scopes["${name}"]`);
    const scopeDescription = reader.optionalText(
      entry.description,
      `capabilities.scopes["${name}"].description`,
    );
    defineScopeEntry(scopes, name, scopeDescription);
  }
  return { ...(catalog.serviceId !== undefined ? { serviceId: reader.serviceId } : {}), scopes };
}

function readIngress(
  reader: DocumentReader,
  value: unknown,
): NonNullable<ServiceDiscoveryDocument['ingress']> {
  const ingress = reader.object(value, 'ingress');
  if (ingress.required !== true) {
    refuseDocument(reader.serviceId, 'ingress.required', 'must be `true`');
  }
  const brokerServiceId = reader.text(ingress.brokerServiceId, 'ingress.brokerServiceId');
  if (brokerServiceId.length === 0) {
    refuseDocument(reader.serviceId, 'ingress.brokerServiceId', 'must not be empty');
  }
  return { required: true, brokerServiceId };
}

function claimUnique(reader: DocumentReader, seen: Set<string>, key: string, what: string): void {
  if (seen.has(key)) {
    refuseDocument(reader.serviceId, what, 'is declared twice', 'discovery_duplicate_projection');
  }
  seen.add(key);
}

function assertUniqueEntries(reader: DocumentReader, abilities: AbilityDiscoveryEntry[]): void {
  const ids = new Set<string>();
  const rpcPaths = new Set<string>();
  const restRoutes = new Set<string>();
  const mcpNames = new Set<string>();
  for (const ability of abilities) {
    claimUnique(reader, ids, ability.id, `ability id ${ability.id}`);
    claimUnique(reader, rpcPaths, ability.rpc.path, `rpc path ${ability.rpc.path}`);
    for (const method of Object.values(ability.methods)) {
      if (method.rest !== undefined) {
        const route = `${method.rest.method.toUpperCase()} ${method.rest.path}`;
        claimUnique(
          reader,
          restRoutes,
          restRouteKey(method.rest.method, method.rest.path),
          `REST route ${route}`,
        );
      }
      for (const { key, what } of mcpProjectionKeys(method)) {
        claimUnique(reader, mcpNames, key, what);
      }
    }
  }
}

/**
 * Validates a discovery document received from a service and returns a normalised copy holding
 * only the known fields. `id` and the optional `capabilities.serviceId` must equal
 * `expectedServiceId` (endpoint configuration is the identity authority); every ability id must
 * be `<expectedServiceId>.<name>`; REST `{name}` variables must be top-level input fields of the
 * method's `inputSchema`; ability ids, RPC paths, REST routes and MCP names must be unique.
 * Throws `SvcConfigurationError` whose `reason` is one of {@link DiscoveryRefusalReason}.
 */
export function parseServiceDiscoveryDocument(
  value: unknown,
  expectedServiceId: string,
): ServiceDiscoveryDocument {
  const reader = new DocumentReader(expectedServiceId);
  const document = reader.object(value, 'document');
  const id = reader.text(document.id, 'id');
  if (id !== expectedServiceId) {
    refuseDocument(
      expectedServiceId,
      'id',
      `is ${JSON.stringify(id.slice(0, 128))}, not the configured service id`,
      'discovery_service_mismatch',
    );
  }
  const title = reader.text(document.title, 'title');
  const version = reader.text(document.version, 'version');
  const capabilities = document.capabilities === undefined
    ? undefined
    : readCapabilities(reader, document.capabilities);
  const ingress = document.ingress === undefined
    ? undefined
    : readIngress(reader, document.ingress);
  if (!Array.isArray(document.abilities)) {
    refuseDocument(expectedServiceId, 'abilities', 'must be an array');
  }
  const abilities = document.abilities.map((entry: unknown, index: number) =>
    readAbility(reader, entry, index)
  );
  assertUniqueEntries(reader, abilities);
  return {
    id,
    title,
    version,
    ...(capabilities !== undefined ? { capabilities } : {}),
    ...(ingress !== undefined ? { ingress } : {}),
    abilities,
  };
}
