/**
 * Ability definitions: a named group of methods, the scopes and access class they require, the
 * RPC route and transports that serve them, and the factory that builds a handler per call.
 * Everything is checked when the service is defined; the result is frozen.
 *
 * @module
 */
import type { Context } from 'hono';
import { isPlainObject, refuseUnknownKeys } from '../core/config-values.ts';
import type { ConnInfo } from '../core/conn-info.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import type { SchemaInput, SchemaOutput } from '../core/schema.ts';
import type { VerifiedIdentity } from '../core/identity.ts';
import {
  isAbilityId,
  isAbilityOfService,
  methodNameProblem,
  rpcPathProblem,
} from './identifiers.ts';
import { checkMethodDefinition, checkScopeList, type MethodDefinition } from './method.ts';
import { mcpProjectionKeys } from './mcp-projection.ts';
import { restRouteKey } from './rest-path.ts';

/** Who may see an ability through the plane's public front doors. */
export type AbilityExposure = 'private' | 'published';

/** Which callers may reach an ability: `service` admits only callers proven to be services. */
export type AbilityAccess = 'plane' | 'service';

/** An RPC transport an ability can be served over. */
export type AbilityTransport = 'http-batch' | 'websocket' | 'cloudflare-binding-rpc';

/** The transports an ability may enable. */
export const ABILITY_TRANSPORTS: readonly AbilityTransport[] = Object.freeze([
  'http-batch',
  'websocket',
  'cloudflare-binding-rpc',
]);

/** The methods of an ability, by name. */
// deno-lint-ignore no-explicit-any
export type AbilityMethods = Record<string, MethodDefinition<any, any, any>>;

/** What a streaming handler may return: an async iterable, a sync iterable or a stream. */
export type StreamSource<T> = AsyncIterable<T> | Iterable<T> | ReadableStream<T>;

/**
 * The handler implementation of one method. It receives the validated input (the input
 * schema's output type) and returns what the output schema accepts: one value for a unary
 * method, a {@link StreamSource} of items for a streaming one.
 */
export type HandlerMethod<M> = M extends MethodDefinition<infer I, infer O, infer S>
  ? S extends true ? (
      input: SchemaOutput<I>,
    ) => StreamSource<SchemaInput<O>> | Promise<StreamSource<SchemaInput<O>>>
  : (input: SchemaOutput<I>) => SchemaInput<O> | Promise<SchemaInput<O>>
  : never;

/** The object a handler factory returns: one implementation per declared method. */
export type AbilityHandlerObject<M extends AbilityMethods> = {
  [K in keyof M]: HandlerMethod<M[K]>;
};

/** What a handler factory receives, once per call, after every check passed. */
export interface HandlerFactoryInput {
  /**
   * Runtime access: the Hono request context of the call (a WebSocket session's is its upgrade
   * request). `context.env` holds the runtime's bindings (a Worker's `env`, typed as you declare
   * it there), `context.req` the request, `context.var` what middleware set.
   */
  context: Context;
  /** The caller, as verified from its capability token. */
  identity: VerifiedIdentity;
  /** Advisory connection info; present only for brokered tokens at an ingress service. */
  connInfo?: ConnInfo;
  /** Aborted when the call's deadline passes (unary) or the consumer cancels (stream). */
  signal: AbortSignal;
  /**
   * Milliseconds left before the call's deadline: `0` once it is gone, `undefined` when the
   * call is unbounded. For a unary method the deadline is the earlier of the method ceiling and
   * the caller's budget; a streaming method reports the caller's budget only.
   */
  remainingTimeoutMs(): number | undefined;
  /** The caller's idempotency key, forwarded as received; the system never deduplicates. */
  idempotencyKey?: string;
  /** The request id of the call. */
  requestId?: string;
}

/** What {@link defineAbility} accepts. */
export interface AbilityOptions<M extends AbilityMethods> {
  /** `<service>.<name>`: two non-empty parts of ASCII letters, digits, `-`, `_`, one dot. */
  id: string;
  /** Human-readable name, published in the discovery document. */
  title?: string;
  /** Human-readable description, published in the discovery document. */
  description?: string;
  /** Who may see the ability through the plane's public front doors. Default `private`. */
  exposure?: AbilityExposure;
  /** `service` admits only callers the plane proved to be services. Default `plane`. */
  access?: AbilityAccess;
  /** Ability-level scopes, required for every method. Default none. */
  scopes?: readonly string[];
  /** Method definitions by name (from `abilityMethod`). */
  methods: M;
  /**
   * Route and transports. Default `{ path: '/rpc/<id>', transports: ['http-batch'] }`; an
   * ability with a streaming method must enable `websocket` or `cloudflare-binding-rpc`.
   */
  rpc?: { path?: string; transports?: readonly AbilityTransport[] };
  /** Builds the handler object for one call; `this` in each method is that object. */
  handler: (input: HandlerFactoryInput) => NoInfer<AbilityHandlerObject<M>>;
}

/** A validated, frozen ability definition with defaults applied. */
export interface AbilityDefinition<M extends AbilityMethods = AbilityMethods> {
  /** `<service>.<name>`; the service serving it must have the id before the dot. */
  readonly id: string;
  /** Human-readable name, when declared. */
  readonly title?: string;
  /** Human-readable description, when declared. */
  readonly description?: string;
  /** Who may see the ability through the plane's public front doors (`private` by default). */
  readonly exposure: AbilityExposure;
  /** Which callers may reach it (`plane` by default). */
  readonly access: AbilityAccess;
  /** Ability-level scopes (de-duplicated), required for every method. */
  readonly scopes: readonly string[];
  /** The checked method definitions by name. */
  readonly methods: Readonly<M>;
  /** The RPC route and the transports it is served over, defaults applied. */
  readonly rpc: { readonly path: string; readonly transports: readonly AbilityTransport[] };
  /** The factory that builds the handler object for one call. */
  readonly handler: (input: HandlerFactoryInput) => AbilityHandlerObject<M>;
}

const ALLOWED_KEYS: readonly string[] = [
  'id',
  'title',
  'description',
  'exposure',
  'access',
  'scopes',
  'methods',
  'rpc',
  'handler',
];
const RPC_FIELDS: readonly string[] = ['path', 'transports'];
const FIELD_REFUSAL = { noun: 'field', reason: 'invalid_ability' } as const;

const definedAbilities = new WeakSet<object>();

/** Whether a value is an ability definition produced by {@link defineAbility}. */
export function isDefinedAbility(value: unknown): value is AbilityDefinition {
  return value !== null && typeof value === 'object' && definedAbilities.has(value);
}

const SESSION_TRANSPORTS: ReadonlySet<AbilityTransport> = new Set([
  'websocket',
  'cloudflare-binding-rpc',
]);

function refuse(label: string, field: string, problem: string, reason = 'invalid_ability'): never {
  throw new SvcConfigurationError(`${label}: ${field} ${problem}`, { reason });
}

function checkId(id: unknown): string {
  if (!isAbilityId(id)) {
    const shown = typeof id === 'string' ? JSON.stringify(id) : typeof id;
    refuse(
      `defineAbility(${shown})`,
      'id',
      'must be `<service>.<name>`: two non-empty parts of ASCII letters, digits, `-` or `_` ' +
        'joined by exactly one dot',
    );
  }
  return id;
}

function checkOneOf<T extends string>(
  value: unknown,
  allowed: readonly T[],
  fallback: T,
  label: string,
  field: string,
): T {
  if (value === undefined) return fallback;
  if (!(allowed as readonly unknown[]).includes(value)) {
    refuse(label, field, `must be one of ${allowed.join(', ')}`);
  }
  return value as T;
}

function checkOptionalText(value: unknown, label: string, field: string): string | undefined {
  if (value !== undefined && typeof value !== 'string') refuse(label, field, 'must be a string');
  return value as string | undefined;
}

function checkMethods(value: unknown, label: string): Record<string, MethodDefinition> {
  if (!isPlainObject(value)) {
    return refuse(label, 'methods', 'must be an object of method definitions');
  }
  const names = Object.keys(value);
  if (names.length === 0) refuse(label, 'methods', 'must declare at least one method');
  const methods: Record<string, MethodDefinition> = {};
  for (const name of names) {
    const problem = methodNameProblem(name);
    if (problem !== undefined) refuse(label, `method name ${JSON.stringify(name)}`, problem);
    // Methods built without abilityMethod get the same checks, with the method named.
    methods[name] = checkMethodDefinition(value[name], `${label} method "${name}"`);
  }
  return Object.freeze(methods);
}

function checkTransports(value: unknown, label: string): readonly AbilityTransport[] {
  if (value === undefined) return Object.freeze(['http-batch'] as AbilityTransport[]);
  if (!Array.isArray(value) || value.length === 0) {
    refuse(
      label,
      'rpc.transports',
      `must be a non-empty array of ${ABILITY_TRANSPORTS.join(', ')}`,
    );
  }
  for (const transport of value) {
    if (!(ABILITY_TRANSPORTS as readonly unknown[]).includes(transport)) {
      refuse(label, 'rpc.transports', `entry ${JSON.stringify(transport)} is not a transport`);
    }
  }
  return Object.freeze([...new Set(value as AbilityTransport[])]);
}

function checkRpc(value: unknown, id: string, label: string): AbilityDefinition['rpc'] {
  if (value !== undefined && !isPlainObject(value)) {
    refuse(label, 'rpc', 'must be an object { path?, transports? }');
  }
  const rpc = (value ?? {}) as Record<string, unknown>;
  refuseUnknownKeys(rpc, RPC_FIELDS, `${label}: rpc`, FIELD_REFUSAL);
  const path = rpc.path ?? `/rpc/${id}`;
  const problem = rpcPathProblem(path);
  if (problem !== undefined) refuse(label, 'rpc.path', problem);
  return Object.freeze({
    path: path as string,
    transports: checkTransports(rpc.transports, label),
  });
}

function checkStreamingTransports(
  methods: Record<string, MethodDefinition>,
  transports: readonly AbilityTransport[],
  label: string,
): void {
  if (transports.some((transport) => SESSION_TRANSPORTS.has(transport))) return;
  const streaming = Object.keys(methods).find((name) => methods[name].stream);
  if (streaming !== undefined) {
    refuse(
      label,
      `method "${streaming}"`,
      'streams, so rpc.transports must enable `websocket` or `cloudflare-binding-rpc`',
    );
  }
}

/**
 * Defines an ability. Applies the defaults (exposure `private`, access `plane`, rpc.path
 * `/rpc/<id>`, transports `['http-batch']`) and refuses, with a `SvcConfigurationError` naming
 * the ability, method and field: a malformed id, unknown fields, invalid enum values or scope
 * names, no methods, a method name that could not be reached over RPC (`authenticate`, `then`,
 * `constructor`, anything on `Object.prototype`...), an invalid method definition, an rpc.path
 * not starting with `/`, and a streaming method without a session transport.
 */
export function defineAbility<M extends AbilityMethods>(
  definition: AbilityOptions<M>,
): AbilityDefinition<M> {
  if (!isPlainObject(definition)) refuse('defineAbility', 'definition', 'must be an object');
  const id = checkId(definition.id);
  const label = `defineAbility(${id})`;
  refuseUnknownKeys(definition, ALLOWED_KEYS, label, FIELD_REFUSAL);
  if (typeof definition.handler !== 'function') {
    refuse(label, 'handler', 'must be a factory function');
  }
  const methods = checkMethods(definition.methods, label);
  const rpc = checkRpc(definition.rpc, id, label);
  checkStreamingTransports(methods, rpc.transports, label);
  const title = checkOptionalText(definition.title, label, 'title');
  const description = checkOptionalText(definition.description, label, 'description');
  const ability: AbilityDefinition<M> = Object.freeze({
    id,
    ...(title !== undefined ? { title } : {}),
    ...(description !== undefined ? { description } : {}),
    exposure: checkOneOf(
      definition.exposure,
      ['private', 'published'],
      'private',
      label,
      'exposure',
    ),
    access: checkOneOf(definition.access, ['plane', 'service'], 'plane', label, 'access'),
    scopes: checkScopeList(definition.scopes, label, 'scopes'),
    methods: methods as Readonly<M>,
    rpc,
    handler: definition.handler as AbilityDefinition<M>['handler'],
  });
  definedAbilities.add(ability);
  return ability;
}

function claimUnique(seen: Map<string, string>, key: string, owner: string, what: string): void {
  const previous = seen.get(key);
  if (previous !== undefined) {
    throw new SvcConfigurationError(
      `${what} is declared twice: by ${previous} and by ${owner}`,
      { reason: 'duplicate_projection' },
    );
  }
  seen.set(key, owner);
}

/**
 * Checks that the abilities of one service can be served side by side: ability ids unique and
 * prefixed `<serviceId>.`, RPC paths unique, REST routes unique (method and path, variable names
 * ignored), MCP tool and prompt names and resource URIs unique. Throws `SvcConfigurationError` naming both owners.
 */
export function assertUniqueProjections(
  abilities: readonly AbilityDefinition[],
  serviceId: string,
): void {
  const ids = new Map<string, string>();
  const rpcPaths = new Map<string, string>();
  const restRoutes = new Map<string, string>();
  const mcpNames = new Map<string, string>();
  for (const ability of abilities) {
    if (!isAbilityOfService(ability.id, serviceId)) {
      throw new SvcConfigurationError(
        `ability ${ability.id} does not belong to service ${serviceId}: its id must start with ` +
          `"${serviceId}."`,
        { reason: 'ability_service_mismatch' },
      );
    }
    claimUnique(ids, ability.id, `ability ${ability.id}`, `ability id ${ability.id}`);
    claimUnique(
      rpcPaths,
      ability.rpc.path,
      `ability ${ability.id}`,
      `rpc path ${ability.rpc.path}`,
    );
    for (const [name, method] of Object.entries(ability.methods)) {
      const owner = `${ability.id} method "${name}"`;
      if (method.rest !== undefined) {
        const route = `${method.rest.method.toUpperCase()} ${method.rest.path}`;
        claimUnique(
          restRoutes,
          restRouteKey(method.rest.method, method.rest.path),
          owner,
          `REST route ${route}`,
        );
      }
      for (const { key, what } of mcpProjectionKeys(method)) {
        claimUnique(mcpNames, key, owner, what);
      }
    }
  }
}
