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
import { SvcConfigurationError } from '../core/errors.ts';
import { applyTimeoutPolicy, type TimeoutPolicy } from '../core/deadline.ts';
import {
  type AbilitySession,
  abilitySession,
  refuseAbilityOutsideTarget,
} from '../caller/ability-session.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcOpenTarget,
  RpcTransportFactory,
} from '../caller/transports/outbound-metadata.ts';
import { type BrokerCaller, tokenShapeForCaller, validateBrokerCaller } from './broker-caller.ts';
import type { Catalog } from './catalog.ts';
import { authorizeAbility, mintForTarget } from './invocation.ts';
import type { createIssuer } from './issuer.ts';
import { keptTransport, type SelectedTransport, selectTransport } from './target-transport.ts';

export {
  type BrokerCaller,
  checkCatalogAccess,
  tokenShapeForCaller,
  validateBrokerCaller,
} from './broker-caller.ts';

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
        const { target, ability } = await authorizeAbility(deps, {
          serviceId: targetServiceId,
          abilityId,
          shape,
          bindings,
          ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
          // Trusted code: a private ability is reachable in-process, never through a front door.
          published: false,
        });
        // Chosen before minting: an ability the plane cannot reach costs no token.
        const chosen = selected === undefined
          ? selectTransport(target.endpoint, ability)
          : keptTransport(target.endpoint, ability, selected.kind);
        const token = await mintForTarget(deps, target, {
          shape,
          abilityId,
          scopes,
          bindings,
          ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
        });
        selected = chosen;
        return token;
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
