/**
 * `plane.abilitySession(options, bindings)`: a typed session for trusted control-plane code.
 *
 * It reuses the plane's catalog, grants and signing material: `caller.kind = 'user'` mints a
 * delegated token (plane-class, acting service = the plane), `kind = 'service'` a service-class
 * token for that service, no caller a plane-class token under the plane's id. A target whose
 * discovery document advertises ingress gets a brokered token automatically. Calls travel over
 * HTTP-batch when the ability offers it, else over WebSocket when the endpoint can dial one. It
 * is not an authentication boundary: the application authenticates the principal first.
 *
 * @module
 */
import { refuseUnknownKeys } from '../core/config-values.ts';
import { type ConnInfo, serializeConnInfo } from '../core/conn-info.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import type { DelegatedSubject } from '../core/identity.ts';
import { isPrincipalKindTooLong, MAX_PRINCIPAL_KIND_LENGTH } from '../core/token-claims.ts';
import { applyTimeoutPolicy, type TimeoutPolicy } from '../core/deadline.ts';
import {
  type AbilitySession,
  abilitySession,
  refuseAbilityOutsideTarget,
} from '../caller/ability-session.ts';
import type { AbilityDiscoveryEntry } from '../service/discovery.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcOpenTarget,
  RpcTransportFactory,
} from '../caller/transports/outbound-metadata.ts';
import type { Catalog, ResolvedTarget } from './catalog.ts';
import type { EndpointRpcKind, ServiceEndpoint } from './endpoints.ts';
import type { createIssuer } from './issuer.ts';

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

/** Options of `plane.abilitySession` (the contract's in-process session options). */
export interface InProcessSessionOptions {
  /** The ability to call, `<targetServiceId>.<name>`. */
  abilityId: string;
  /** The service serving it; must be in the plane's catalog. */
  targetServiceId: string;
  /**
   * Scopes each token asks for (at least one): published by the target and granted by its
   * `grants` to the caller's service id (the plane's own id unless `caller.kind` is `service`).
   */
  scopes: readonly string[];
  /**
   * Who the plane acts for: `kind: 'user'` mints delegated tokens, `'service'` service-class
   * tokens for that service. Default: plane-class tokens under the plane's id, no subject.
   */
  caller?: BrokerCaller;
  /** Advisory connection info forwarded to the service; its handlers see it only behind ingress. */
  connInfo?: ConnInfo;
  /** Forwarded to the service with every call (never deduplicated by svcplane). */
  idempotencyKey?: string;
  /** Forwarded with every call and with the target's discovery request. */
  requestId?: string;
  /**
   * Budget of each call in milliseconds, catalog resolution and token issuance included; `0`
   * fails every call. Default: the plane's `timeout.defaultMs`, else unbounded.
   */
  timeoutMs?: number;
}

/** Every key of {@link InProcessSessionOptions} (the contract's in-process session options). */
const SESSION_OPTIONS: readonly string[] = [
  'abilityId',
  'targetServiceId',
  'scopes',
  'caller',
  'connInfo',
  'idempotencyKey',
  'requestId',
  'timeoutMs',
];
const CALLER_FIELDS: readonly string[] = ['id', 'kind', 'orgId', 'principalKind'];

interface SessionDependencies {
  planeServiceId: string;
  catalog: Catalog;
  issuer: ReturnType<typeof createIssuer>;
  timeoutPolicy: TimeoutPolicy;
}

function text(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new SvcConfigurationError(`abilitySession: \`${field}\` must be a non-empty string`);
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
  const id = text(record.id, 'caller.id');
  if (record.kind !== 'service' && record.kind !== 'user') {
    throw new SvcConfigurationError(`${label}: caller.kind must be 'service' or 'user'`);
  }
  const checked: BrokerCaller = { id, kind: record.kind };
  if (record.orgId !== undefined) {
    // A service caller's token carries no subject, so an org would be dropped unseen.
    if (record.kind === 'service') {
      throw new SvcConfigurationError(`${label}: a service caller carries no orgId`);
    }
    checked.orgId = text(record.orgId, 'caller.orgId');
  }
  if (record.principalKind !== undefined) {
    const kind = text(record.principalKind, 'caller.principalKind');
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

function noUsableTransport(
  ability: AbilityDiscoveryEntry,
  endpoint: ServiceEndpoint,
  why: string,
): never {
  throw new SvcConfigurationError(
    `abilitySession: ${ability.id} is served over ${ability.rpc.transports.join(', ')}, and ` +
      `the plane cannot reach it that way through service "${endpoint.id}": ${why}`,
    { reason: 'rpc_transport_unavailable' },
  );
}

/** The transport an in-process session travels on, and its kind. */
interface SelectedTransport {
  kind: EndpointRpcKind;
  transport: RpcTransportFactory;
}

/**
 * The transport an in-process session uses, from what the ability offers and the endpoint can
 * open. An ability with streaming methods goes over WebSocket when it can (streams need a
 * session transport, as the broker's plane leg does); otherwise HTTP-batch comes first (nothing
 * stays open between calls). A session keeps its first choice: the ability session treats
 * batches and a long-lived session differently, so the kind must not change under it.
 */
function selectTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
): SelectedTransport {
  const offered = ability.rpc.transports;
  const streams = Object.values(ability.methods).some((method) => method.stream === true);
  const preference: EndpointRpcKind[] = streams
    ? ['websocket', 'http-batch']
    : ['http-batch', 'websocket'];
  const candidates = preference.filter((kind) => offered.includes(kind));
  if (candidates.length === 0) {
    return noUsableTransport(ability, endpoint, 'the plane opens http-batch and websocket only');
  }
  for (const [index, kind] of candidates.entries()) {
    const selected = openableTransport(endpoint, ability, kind, index < candidates.length - 1);
    if (selected !== undefined) return { kind, transport: selected };
  }
  return noUsableTransport(ability, endpoint, 'no offered transport can be opened');
}

/** The transport of the kind a session already uses, to the ability's current route. */
function keptTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  kind: EndpointRpcKind,
): SelectedTransport {
  if (!ability.rpc.transports.includes(kind)) {
    noUsableTransport(ability, endpoint, `the session travels over ${kind}, no longer offered`);
  }
  return { kind, transport: openableTransport(endpoint, ability, kind, false)! };
}

/**
 * The endpoint's transport of `kind` to the ability's route. A WebSocket the endpoint cannot
 * dial is `undefined` when another kind remains to try, else refused.
 */
function openableTransport(
  endpoint: ServiceEndpoint,
  ability: AbilityDiscoveryEntry,
  kind: EndpointRpcKind,
  alternativeLeft: boolean,
): RpcTransportFactory | undefined {
  try {
    return endpoint.rpcTransport(ability.rpc.path, kind);
  } catch (error) {
    // The endpoint's own refusal says why; this one also says which ability cannot be reached.
    if (error instanceof SvcConfigurationError && error.reason === 'websocket_unavailable') {
      if (alternativeLeft) return undefined;
      noUsableTransport(ability, endpoint, error.message);
    }
    throw error;
  }
}

/**
 * A transport that is chosen once the target is resolved (during token issuance, which the
 * session always runs before it opens anything). Its `kind` is the chosen transport's, read by
 * the ability session only after the first token request.
 *
 * `budgetIsPolicyDefault`: the per-call budget came from the plane's `timeout.defaultMs`, not
 * from the caller. A long-lived session sends its budget once, at open, and the service bounds
 * the whole session by it, so a default is kept off the wire there (as the service itself
 * applies a default to per-call transports only); each call is still bounded locally.
 */
function deferredTransport(
  resolve: () => RpcTransportFactory | undefined,
  budgetIsPolicyDefault: boolean,
): RpcTransportFactory {
  return {
    get kind() {
      return resolve()?.kind ?? 'http-batch';
    },
    open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession {
      const transport = resolve();
      if (transport === undefined) {
        throw new SvcConfigurationError('abilitySession: the target was not resolved before open');
      }
      if (budgetIsPolicyDefault && transport.kind !== 'http-batch') {
        const { timeoutMs: _default, ...rest } = meta;
        return transport.open(rest, target);
      }
      return transport.open(meta, target);
    },
  };
}

/**
 * The options object, with no key beyond the contract's: a misspelt `caler` would otherwise
 * run the session as the plane itself, with no subject.
 */
function sessionOptions(options: unknown): Record<string, unknown> {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError('abilitySession: options must be an object');
  }
  refuseUnknownKeys(options, SESSION_OPTIONS, 'abilitySession');
  return options as Record<string, unknown>;
}

/**
 * The ability id, which must belong to the target (`<targetServiceId>.<name>`, as
 * `createService` requires of its abilities): another one could only fail at the first call.
 */
function abilityOfTarget(options: Record<string, unknown>): [string, string] {
  const abilityId = text(options.abilityId, 'abilityId');
  const targetServiceId = text(options.targetServiceId, 'targetServiceId');
  refuseAbilityOutsideTarget(abilityId, targetServiceId);
  return [abilityId, targetServiceId];
}

/**
 * The requested scopes: a non-empty list of non-empty strings. The issuer refuses an empty list
 * on every mint, so a session asking for none could never make a call.
 */
function requestedScopes(scopes: unknown): readonly string[] {
  if (
    !Array.isArray(scopes) || scopes.length === 0 ||
    !scopes.every((scope) => typeof scope === 'string' && scope.length > 0)
  ) {
    throw new SvcConfigurationError(
      'abilitySession: `scopes` must be a non-empty array of scope names (a token is never ' +
        'minted without one)',
      { reason: 'scopes_required' },
    );
  }
  // A copy: the caller's list stays theirs to change while the session lives.
  return Object.freeze([...scopes]);
}

/** The session budget: a whole, non-negative number of milliseconds (`0` fails every call). */
function budgetOf(timeoutMs: unknown): number | undefined {
  if (timeoutMs === undefined) return undefined;
  if (typeof timeoutMs !== 'number' || !Number.isSafeInteger(timeoutMs) || timeoutMs < 0) {
    throw new SvcConfigurationError(
      'abilitySession: timeoutMs must be a non-negative integer number of milliseconds',
      { reason: 'invalid_timeout' },
    );
  }
  return timeoutMs;
}

/** Builds `plane.abilitySession`. */
export function createInProcessSessions(deps: SessionDependencies) {
  return {
    /** Opens a typed, disposable session with one ability, as the plane (see module docs). */
    abilitySession<Api = Record<string, (input: unknown) => unknown>>(
      options: InProcessSessionOptions,
      bindings?: unknown,
    ): AbilitySession<Api> {
      const [abilityId, targetServiceId] = abilityOfTarget(sessionOptions(options));
      const scopes = requestedScopes(options.scopes);
      const caller = options.caller === undefined
        ? undefined
        : validateBrokerCaller(options.caller, 'abilitySession');
      const shape = tokenShapeForCaller(caller, deps.planeServiceId);
      let selected: SelectedTransport | undefined;
      const requestToken = async () => {
        // A call through the plane, not a token request: the `default` purpose's snapshot.
        const target = await deps.catalog.target(targetServiceId, bindings, 'default', {
          ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
        });
        checkCatalogAccess(target, abilityId, shape.callerAccess);
        const ability = target.document.abilities.find((entry) => entry.id === abilityId)!;
        // Chosen before minting: an ability the plane cannot reach costs no token.
        const chosen = selected === undefined
          ? selectTransport(target.endpoint, ability)
          : keptTransport(target.endpoint, ability, selected.kind);
        const issued = await deps.issuer.mintWithTarget(
          { ...shape, targetServiceId, scopes, abilityId, context: bindings },
          target.document.ingress !== undefined,
          target,
        );
        selected = chosen;
        return issued.token;
      };
      const callerBudget = budgetOf(options.timeoutMs);
      const timeoutMs = applyTimeoutPolicy(callerBudget, deps.timeoutPolicy, {
        perCallTransport: true,
      });
      return abilitySession<Api>({
        abilityId,
        callerServiceId: shape.callerServiceId,
        targetServiceId,
        scopes,
        requestToken,
        transport: deferredTransport(
          () => selected?.transport,
          callerBudget === undefined && timeoutMs !== undefined,
        ),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
        ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
        ...(options.connInfo !== undefined
          ? { connInfo: serializeConnInfo(options.connInfo) }
          : {}),
      });
    },
  };
}
