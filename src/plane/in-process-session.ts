/**
 * `plane.abilitySession(options, bindings)`: a typed session for trusted control-plane code.
 *
 * It reuses the plane's catalog, grants and signing material: `caller.kind = 'user'` mints a
 * delegated token (plane-class, acting service = the plane), `kind = 'service'` a service-class
 * token for that service, no caller a plane-class token under the plane's id. A target whose
 * discovery document advertises ingress gets a brokered token automatically. It is not an
 * authentication boundary: the application authenticates the principal first.
 *
 * @module
 */
import { type ConnInfo, serializeConnInfo } from '../core/conn-info.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import type { DelegatedSubject } from '../core/identity.ts';
import { isPrincipalKindTooLong, MAX_PRINCIPAL_KIND_LENGTH } from '../core/token-claims.ts';
import { applyTimeoutPolicy, type TimeoutPolicy } from '../core/deadline.ts';
import { type AbilitySession, abilitySession } from '../service/ability-session.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcOpenTarget,
  RpcTransportFactory,
} from '../service/transports/outbound-metadata.ts';
import type { Catalog, ResolvedTarget } from './catalog.ts';
import type { createIssuer } from './issuer.ts';

/** The broker caller: who the plane is acting for (set by invocation middleware or app code). */
export interface BrokerCaller {
  id: string;
  /** `service` only for callers the plane proved to be services; everything else is `user`. */
  kind: 'service' | 'user';
  orgId?: string;
  /** Application-owned principal category (`api_key`, `automation`...); never changes access. */
  principalKind?: string;
}

/** Options of `plane.abilitySession` (the contract's in-process session options). */
export interface InProcessSessionOptions {
  abilityId: string;
  targetServiceId: string;
  scopes: string[];
  caller?: BrokerCaller;
  connInfo?: ConnInfo;
  idempotencyKey?: string;
  requestId?: string;
  /** Budget of each call, catalog resolution and token issuance included. */
  timeoutMs?: number;
}

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

/** Validates a broker caller; `principalKind` belongs to user-class callers only. */
export function validateBrokerCaller(caller: unknown, label: string): BrokerCaller {
  if (caller === null || typeof caller !== 'object' || Array.isArray(caller)) {
    throw new SvcConfigurationError(
      `${label}: caller must be { id, kind, orgId?, principalKind? }`,
    );
  }
  const record = caller as Record<string, unknown>;
  const id = text(record.id, 'caller.id');
  if (record.kind !== 'service' && record.kind !== 'user') {
    throw new SvcConfigurationError(`${label}: caller.kind must be 'service' or 'user'`);
  }
  const checked: BrokerCaller = { id, kind: record.kind };
  if (record.orgId !== undefined) checked.orgId = text(record.orgId, 'caller.orgId');
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

/**
 * A transport that is chosen once the target is resolved (during token issuance, which the
 * session always runs before it opens anything).
 */
function deferredTransport(resolve: () => RpcTransportFactory | undefined): RpcTransportFactory {
  return {
    kind: 'http-batch',
    open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession {
      const transport = resolve();
      if (transport === undefined) {
        throw new SvcConfigurationError('abilitySession: the target was not resolved before open');
      }
      return transport.open(meta, target);
    },
  };
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
      const abilityId = text(options?.abilityId, 'abilityId');
      const targetServiceId = text(options.targetServiceId, 'targetServiceId');
      const caller = options.caller === undefined
        ? undefined
        : validateBrokerCaller(options.caller, 'abilitySession');
      const shape = tokenShapeForCaller(caller, deps.planeServiceId);
      let transport: RpcTransportFactory | undefined;
      const requestToken = async () => {
        const target = await deps.catalog.target(targetServiceId, bindings, 'token', {
          ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
        });
        checkCatalogAccess(target, abilityId, shape.callerAccess);
        const ability = target.document.abilities.find((entry) => entry.id === abilityId)!;
        const issued = await deps.issuer.mintWithTarget(
          { ...shape, targetServiceId, scopes: options.scopes, abilityId, context: bindings },
          target.document.ingress !== undefined,
          target,
        );
        transport = target.endpoint.rpcTransport(ability.rpc.path, 'http-batch');
        return issued.token;
      };
      const timeoutMs = applyTimeoutPolicy(budgetOf(options.timeoutMs), deps.timeoutPolicy, {
        perCallTransport: true,
      });
      return abilitySession<Api>({
        abilityId,
        callerServiceId: shape.callerServiceId,
        targetServiceId,
        scopes: options.scopes,
        requestToken,
        transport: deferredTransport(() => transport),
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
