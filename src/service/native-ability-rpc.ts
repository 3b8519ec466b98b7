/**
 * Native Workers binding RPC, service side: `connectAbility(request)`, the method a service's
 * Workers entrypoint offers to a caller (the control plane's broker, another Worker) bound to it.
 *
 * The request carries the token, the proof and the propagated metadata as fields, and a byte
 * stream of the caller's Cap'n Web messages; the answer is the byte stream of the service's. The
 * session's main object is the ability stub itself: the token was checked before the answer, by
 * the same gateway (`authenticate`) as the HTTP routes, so ingress, access class, proof and
 * connection-info rules are identical. A refusal is answered as data (`{ error }`), never thrown:
 * what a thrown error keeps across a binding depends on both Workers' compatibility dates.
 *
 * @module
 */
import { RpcSession } from 'capnweb';
import { Context } from 'hono';
import { parseConnInfo } from '../core/conn-info.ts';
import { applyTimeoutPolicy, normalizeTimeoutBudget } from '../core/deadline.ts';
import { hasSvcErrorShape, SvcConfigurationError, svcErrorInfo } from '../core/errors.ts';
import { filterIdempotencyKey } from '../core/idempotency.ts';
import type { SvcLogEvent } from '../core/logging.ts';
import { errorWithheldEvent } from './log-events.ts';
import { OPAQUE_PROBLEM_DETAIL } from '../core/problem.ts';
import { acceptRequestId, generateRequestId } from '../core/request-id.ts';
import type { AbilityDefinition } from './ability.ts';
import { AbilityGateway } from './ability-gateway.ts';
import { bytePipe, ByteStreamRpcTransport } from './byte-stream-rpc-transport.ts';
import type { InboundRpcMetadata } from './inbound-metadata.ts';
import { sessionErrorReplacer } from './rpc-serve.ts';
import type { ResolvedServiceOptions } from './service-options.ts';

/** What a caller sends to `connectAbility`. */
export interface ConnectAbilityRequest {
  /** The ability to open a session with. */
  abilityId: string;
  /** The capability token (never in a URL or header: a field of the binding call). */
  token: string;
  /** Proof of possession, for a bound token. */
  proof?: string;
  /** Request id, adopted when well formed. */
  requestId?: string;
  /** Serialised connection info (`serializeConnInfo`); honoured only behind ingress. */
  connInfo?: string;
  /** Budget in milliseconds for the calls this connection carries (the caller connects per call). */
  timeoutMs?: number;
  /** Idempotency key; dropped unless well formed. */
  idempotencyKey?: string;
  /** The caller's Cap'n Web messages, newline-framed UTF-8. */
  messages: ReadableStream<Uint8Array>;
}

/** A refusal as plain data: the taxonomy fields and a bounded message. */
export interface ConnectAbilityRefusal {
  error: { code: string; status: number; retryable: boolean; reason?: string; message: string };
  messages?: never;
}

/** What `connectAbility` resolves with: the service's message stream, or a refusal. */
export type ConnectAbilityAnswer =
  | { messages: ReadableStream<Uint8Array>; error?: never }
  | ConnectAbilityRefusal;

/** Longest refusal message carried across the binding. */
const MAX_REFUSAL_MESSAGE_LENGTH = 512;

/** The transport name abilities enable to be served over a native binding. */
export const NATIVE_BINDING_TRANSPORT = 'cloudflare-binding-rpc';

function fieldText(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The request's metadata, filtered by the same rules as the HTTP channels. */
function inboundMetadata(request: Record<string, unknown>): InboundRpcMetadata {
  const metadata: InboundRpcMetadata = {};
  const budgetMs = normalizeTimeoutBudget(request.timeoutMs);
  if (budgetMs !== undefined) metadata.budgetMs = budgetMs;
  const idempotencyKey = filterIdempotencyKey(fieldText(request.idempotencyKey));
  if (idempotencyKey !== undefined) metadata.idempotencyKey = idempotencyKey;
  const connInfo = parseConnInfo(fieldText(request.connInfo));
  if (connInfo !== undefined) metadata.connInfo = connInfo;
  return metadata;
}

/** A thrown error as the refusal the binding carries; an unshaped one reads as opaque. */
function refusal(error: unknown): ConnectAbilityRefusal {
  const info = svcErrorInfo(error);
  const opaque = !hasSvcErrorShape(error) || error instanceof SvcConfigurationError;
  const text = (error as { message?: unknown } | null)?.message;
  const message = opaque || typeof text !== 'string' || text === ''
    ? OPAQUE_PROBLEM_DETAIL
    : text.slice(0, MAX_REFUSAL_MESSAGE_LENGTH);
  return { error: { ...info, message } };
}

function refuse(status: 404 | 405 | 422, reason: string, message: string): ConnectAbilityRefusal {
  return {
    error: {
      code: status === 422 ? 'ability_validation' : 'internal',
      status,
      retryable: false,
      reason,
      message,
    },
  };
}

/**
 * The handler factories' `context` for a session opened over a binding: a Hono context as on the
 * HTTP routes, whose `env` is the entrypoint's and whose request names the ability's route.
 */
function nativeCallContext(rpcPath: string, env: unknown, requestId: string): Context {
  const context = new Context(new Request(new URL(rpcPath, 'https://svc.internal/')), { env });
  context.set('requestId' as never, requestId as never);
  return context;
}

/** What the connector needs from the service. */
export interface NativeConnectorOptions {
  // deno-lint-ignore no-explicit-any
  abilities: readonly AbilityDefinition<any>[];
  service: ResolvedServiceOptions;
  emit(event: SvcLogEvent): void;
}

/** Builds a service's `connectAbility(request, env?)`. */
export function createNativeAbilityConnector(options: NativeConnectorOptions) {
  const byId = new Map(options.abilities.map((ability) => [ability.id, ability]));
  return async function connectAbility(
    request: ConnectAbilityRequest,
    env?: unknown,
  ): Promise<ConnectAbilityAnswer> {
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      return refuse(422, 'invalid_connect_request', 'connectAbility needs a request object');
    }
    const record = request as unknown as Record<string, unknown>;
    const messages = record.messages;
    if (!(messages instanceof ReadableStream)) {
      return refuse(
        422,
        'invalid_connect_request',
        'connectAbility needs a `messages` byte stream',
      );
    }
    const ability = byId.get(fieldText(record.abilityId) ?? '');
    if (ability === undefined) {
      messages.cancel().catch(() => {});
      return refuse(404, 'unknown_ability', 'No such ability on this service');
    }
    if (!ability.rpc.transports.includes(NATIVE_BINDING_TRANSPORT)) {
      messages.cancel().catch(() => {});
      return refuse(
        405,
        'rpc_transport_not_enabled',
        `${NATIVE_BINDING_TRANSPORT} is not an enabled transport of ${ability.id}`,
      );
    }
    const requestId = acceptRequestId(fieldText(record.requestId)) ?? generateRequestId();
    const metadata = inboundMetadata(record);
    const arrivedAt = Date.now();
    const budgetMs = applyTimeoutPolicy(metadata.budgetMs, options.service.timeoutPolicy, {
      perCallTransport: true,
    });
    const log = (event: SvcLogEvent) => options.emit(event);
    const gateway = new AbilityGateway({
      ability,
      service: options.service,
      transport: 'cloudflare-binding-rpc',
      metadata,
      ...(budgetMs !== undefined ? { callerDeadlineEndsAt: arrivedAt + budgetMs } : {}),
      requestId,
      context: nativeCallContext(ability.rpc.path, env, requestId),
      log,
    });
    let target;
    try {
      target = await gateway.authenticate(record.token, record.proof);
    } catch (error) {
      messages.cancel().catch(() => {});
      return refusal(error);
    }
    const outgoing = bytePipe();
    const transport = new ByteStreamRpcTransport(messages, outgoing.writable, 'service');
    const replacer = sessionErrorReplacer({
      onErrorReplaced: (error) => log(errorWithheldEvent(requestId, ability.id, error)),
    }, () => transport.closed);
    const session = new RpcSession(transport, target, { onSendError: replacer });
    transport.onClosed(() => session.getRemoteMain()[Symbol.dispose]());
    return { messages: outgoing.readable };
  };
}
