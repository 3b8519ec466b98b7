/**
 * The broker's Cap'n Web main object: `connect({ targetServiceId, abilityId, scopes })`.
 *
 * `connect` runs the shared authorization from the catalog first (budget left, published
 * exposure, access class: a service-only ability refuses a non-service caller with 403 before
 * any token is minted or any request sent), then mints the token the caller's kind needs (the
 * issuer checks grants and scopes; brokered when the target advertises ingress), checks that the
 * budget survived the plane's own work, and returns the brokered stub. The plane's leg opens with
 * the first call: HTTP-batch for a caller on HTTP-batch; for a caller on WebSocket, the
 * endpoint's native binding when it has `abilityRpc`, else a WebSocket.
 *
 * @module
 */
import { RpcTarget } from 'capnweb';
import { serializeConnInfo } from '../../core/conn-info.ts';
import {
  AbilityValidationError,
  svcErrorInfo,
  SvcInternalError,
  SvcTimeoutError,
} from '../../core/errors.ts';
import type { SvcEventLog } from '../../core/logging.ts';
import { abilitySession } from '../../caller/ability-session.ts';
import { isAbilityOfService } from '../../service/identifiers.ts';
import { tokenShapeForCaller } from '../broker-caller.ts';
import type { Invocation, InvocationContext } from '../invocation.ts';
import { selectTransport } from '../target-transport.ts';
import { brokeredAbility } from './brokered-ability.ts';

/** Events of the broker's `connect`. */
export const BROKER_CONNECT_COMPLETED_EVENT = 'svc.broker.connect.completed';
export const BROKER_CONNECT_FAILED_EVENT = 'svc.broker.connect.failed';

/** Most scopes one `connect` may ask for. */
const MAX_CONNECT_SCOPES = 64;
/** Longest id or scope a `connect` may name. */
const MAX_CONNECT_TEXT = 256;

/** What a caller asks `connect` for. */
export interface BrokerConnectRequest {
  targetServiceId: string;
  abilityId: string;
  scopes: string[];
}

/** What one broker session knows of its request. */
export interface BrokerSessionContext {
  invocation: Invocation;
  /** The plane's id (the acting service of plane-class tokens). */
  planeServiceId: string;
  /** The caller, metadata and deadline of the session's request. */
  invocationContext: InvocationContext;
  /** How the caller reached the broker. */
  callerTransport: 'http-batch' | 'websocket';
  log: SvcEventLog;
  /** The request context, handed to the log with every event. */
  logContext: unknown;
}

function isText(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_CONNECT_TEXT;
}

function invalid(message: string, path: string): never {
  throw new AbilityValidationError(`connect: ${message}`, {
    reason: 'invalid_connect_request',
    issues: [{ message, path: [path] }],
  });
}

/** The request, checked member by member; anything beyond the three members is refused. */
function connectRequest(value: unknown): BrokerConnectRequest {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    invalid('expected an object { targetServiceId, abilityId, scopes }', 'request');
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key !== 'targetServiceId' && key !== 'abilityId' && key !== 'scopes') {
      invalid(`unknown member ${JSON.stringify(key.slice(0, 64))}`, key.slice(0, 64));
    }
  }
  if (!isText(record.targetServiceId)) invalid('must be a non-empty string', 'targetServiceId');
  if (!isText(record.abilityId)) invalid('must be a non-empty string', 'abilityId');
  if (!isAbilityOfService(record.abilityId, record.targetServiceId)) {
    invalid('must be an ability of targetServiceId', 'abilityId');
  }
  const scopes = record.scopes;
  if (
    !Array.isArray(scopes) || scopes.length === 0 || scopes.length > MAX_CONNECT_SCOPES ||
    !scopes.every(isText)
  ) {
    invalid(`must be 1 to ${MAX_CONNECT_SCOPES} scope names`, 'scopes');
  }
  return {
    targetServiceId: record.targetServiceId,
    abilityId: record.abilityId,
    scopes: [...scopes],
  };
}

function budgetExhausted(abilityId: string): SvcTimeoutError {
  return new SvcTimeoutError(
    `The budget for ${abilityId} ran out at the broker before a service session was opened`,
    { reason: 'budget_exhausted' },
  );
}

function sessionEnded(): SvcInternalError {
  return new SvcInternalError('The broker session ended before connect finished', {
    reason: 'rpc_connection_lost',
    status: 503,
  });
}

/** The broker's main object for one session (one HTTP batch, or one WebSocket). */
export class BrokerMain extends RpcTarget {
  #context: BrokerSessionContext;
  #open = new Set<Disposable>();
  #disposed = false;

  constructor(context: BrokerSessionContext) {
    super();
    this.#context = context;
  }

  /**
   * Authorizes the caller for one ability and returns its brokered stub (see the module notes).
   * Refusals are typed: 422 for a malformed request, 403 from the catalog or the grants, 504
   * when the budget ran out first.
   */
  async connect(request: unknown): Promise<RpcTarget> {
    const startedAt = Date.now();
    const { invocationContext: ctx, callerTransport } = this.#context;
    const named = request !== null && typeof request === 'object'
      ? request as Record<string, unknown>
      : {};
    try {
      const connect = connectRequest(request);
      const authorized = await this.#context.invocation.authorize(
        { serviceId: connect.targetServiceId, abilityId: connect.abilityId, method: '' },
        ctx,
        { scopes: connect.scopes },
      );
      const leg = selectTransport(
        authorized.target.endpoint,
        authorized.ability,
        callerTransport !== 'http-batch',
      );
      let token: string | undefined = await authorized.mintToken();
      const remaining = ctx.deadline === undefined ? undefined : ctx.deadline - Date.now();
      if (remaining !== undefined && remaining <= 0) throw budgetExhausted(connect.abilityId);
      if (this.#disposed) throw sessionEnded();
      const session = abilitySession({
        abilityId: authorized.ability.id,
        callerServiceId:
          tokenShapeForCaller(ctx.caller, this.#context.planeServiceId).callerServiceId,
        targetServiceId: connect.targetServiceId,
        scopes: authorized.scopes,
        // The token minted here first; a renewal mints again (the grant check runs again).
        requestToken: () => {
          const first = token;
          token = undefined;
          return first !== undefined ? Promise.resolve(first) : authorized.mintToken();
        },
        transport: leg.transport,
        ...(remaining !== undefined ? { timeoutMs: remaining } : {}),
        ...(ctx.idempotencyKey !== undefined ? { idempotencyKey: ctx.idempotencyKey } : {}),
        requestId: ctx.requestId,
        ...(ctx.connInfo !== undefined ? { connInfo: serializeConnInfo(ctx.connInfo) } : {}),
      });
      const handle: Disposable = {
        [Symbol.dispose]: () => stub[Symbol.dispose](),
      };
      const stub = brokeredAbility(authorized.ability, {
        session,
        ...(ctx.deadline !== undefined ? { deadline: ctx.deadline } : {}),
        callerBatch: callerTransport === 'http-batch',
        onDispose: () => this.#open.delete(handle),
      }) as RpcTarget & Disposable;
      this.#open.add(handle);
      this.#log(BROKER_CONNECT_COMPLETED_EVENT, 'info', named, startedAt, {
        leg: leg.kind,
      });
      return stub;
    } catch (error) {
      const info = svcErrorInfo(error);
      this.#log(
        BROKER_CONNECT_FAILED_EVENT,
        info.status >= 500 ? 'error' : 'warn',
        named,
        startedAt,
        {
          code: info.code,
          status: info.status,
          ...(info.reason !== undefined ? { reason: info.reason } : {}),
        },
      );
      throw error;
    }
  }

  /** The session ended: every leg it opened is closed. */
  [Symbol.dispose](): void {
    this.#disposed = true;
    for (const handle of [...this.#open]) handle[Symbol.dispose]();
    this.#open.clear();
  }

  #log(
    event: string,
    level: 'info' | 'warn' | 'error',
    request: Record<string, unknown>,
    startedAt: number,
    extra: Record<string, unknown>,
  ): void {
    const { invocationContext: ctx, callerTransport } = this.#context;
    this.#context.log({
      event,
      level,
      requestId: ctx.requestId,
      ...(isText(request.targetServiceId) ? { targetServiceId: request.targetServiceId } : {}),
      ...(isText(request.abilityId) ? { abilityId: request.abilityId } : {}),
      callerKind: ctx.caller.kind,
      transport: callerTransport,
      durationMs: Date.now() - startedAt,
      ...extra,
    }, this.#context.logContext);
  }
}
