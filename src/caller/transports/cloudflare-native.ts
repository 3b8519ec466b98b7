/**
 * The native Workers binding transport: a session with an ability over a service binding's JS
 * RPC, through the service entrypoint's `connectAbility`.
 *
 * `authenticate(token, proof?)` becomes one `connectAbility` call carrying the token, the proof
 * and the propagated metadata as fields (`requestId`, `connInfo`, `timeoutMs`,
 * `idempotencyKey`), and a byte stream of this end's Cap'n Web messages; the answer is the
 * service's stream, whose session's main object is the ability stub. Calls pipelined on
 * `authenticate` travel once it answers. A refusal arrives as data and is rebuilt as an error
 * carrying its taxonomy fields, whatever either Worker's error serialisation.
 *
 * @module
 */
import { RpcSession, RpcStub, RpcTarget } from 'capnweb';
import { SvcConfigurationError, SvcInternalError } from '../../core/errors.ts';
import { normalizeTimeoutBudget } from '../../core/deadline.ts';
import { filterIdempotencyKey } from '../../core/idempotency.ts';
import { acceptRequestId } from '../../core/request-id.ts';
import { bytePipe, ByteStreamRpcTransport } from '../../service/byte-stream-rpc-transport.ts';
import type {
  ConnectAbilityAnswer,
  ConnectAbilityRequest,
} from '../../service/native-ability-rpc.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcMainStub,
  RpcOpenTarget,
  RpcTransportFactory,
} from './outbound-metadata.ts';

/** A service entrypoint reached over a binding: anything with `connectAbility`. */
export interface NativeAbilityBinding {
  /** The service's `connectAbility` (a `WorkerEntrypoint` method calling `service.connectAbility`). */
  connectAbility(request: ConnectAbilityRequest): Promise<ConnectAbilityAnswer>;
}

/** The refusal the entrypoint answered, as an error whose own fields `svcErrorInfo` reads. */
function refusalError(error: unknown): Error {
  const record = (error !== null && typeof error === 'object' ? error : {}) as Record<
    string,
    unknown
  >;
  const message = typeof record.message === 'string' ? record.message : 'connectAbility refused';
  const rebuilt = new Error(message);
  for (const key of ['code', 'status', 'retryable', 'reason'] as const) {
    if (record[key] !== undefined) {
      (rebuilt as unknown as Record<string, unknown>)[key] = record[key];
    }
  }
  return rebuilt;
}

function connectionLost(): SvcInternalError {
  return new SvcInternalError('The native binding session ended', {
    reason: 'rpc_connection_lost',
    status: 503,
  });
}

/** The metadata as `connectAbility` fields, filtered as on the other channels. */
function metadataFields(meta: OutboundRpcMetadata): Partial<ConnectAbilityRequest> {
  const fields: Partial<ConnectAbilityRequest> = {};
  const requestId = acceptRequestId(meta.requestId);
  if (requestId !== undefined) fields.requestId = requestId;
  const budget = meta.timeoutMs !== undefined && meta.timeoutMs > 0
    ? normalizeTimeoutBudget(Math.max(1, Math.floor(meta.timeoutMs)))
    : undefined;
  if (budget !== undefined) fields.timeoutMs = budget;
  const idempotencyKey = filterIdempotencyKey(meta.idempotencyKey);
  if (idempotencyKey !== undefined) fields.idempotencyKey = idempotencyKey;
  if (typeof meta.connInfo === 'string') fields.connInfo = meta.connInfo;
  return fields;
}

/** One opened session: each `authenticate` connects once; all its connections close together. */
class NativeSessionMain extends RpcTarget {
  #binding: NativeAbilityBinding;
  #request: Omit<ConnectAbilityRequest, 'token' | 'messages'>;
  #transports = new Set<ByteStreamRpcTransport>();
  #broken: ((error: unknown) => void)[] = [];
  #closed = false;

  constructor(
    binding: NativeAbilityBinding,
    request: Omit<ConnectAbilityRequest, 'token' | 'messages'>,
  ) {
    super();
    this.#binding = binding;
    this.#request = request;
  }

  async authenticate(token: string, proof?: string): Promise<unknown> {
    if (this.#closed) throw connectionLost();
    const pipe = bytePipe();
    const answer = await this.#binding.connectAbility({
      ...this.#request,
      token,
      ...(proof !== undefined ? { proof } : {}),
      messages: pipe.readable,
    });
    if (answer === null || typeof answer !== 'object') {
      throw new SvcInternalError('connectAbility answered neither a session nor a refusal', {
        reason: 'rpc_connection_failed',
        status: 502,
      });
    }
    if (answer.error !== undefined || !(answer.messages instanceof ReadableStream)) {
      pipe.writable.abort().catch(() => {});
      throw refusalError(answer.error);
    }
    const transport = new ByteStreamRpcTransport(answer.messages, pipe.writable, 'caller');
    if (this.#closed) {
      transport.close();
      throw connectionLost();
    }
    this.#transports.add(transport);
    transport.onClosed(() => {
      this.#transports.delete(transport);
      if (!this.#closed) { for (const callback of this.#broken) callback(connectionLost()); }
    });
    return new RpcSession(transport).getRemoteMain();
  }

  onBroken(callback: (error: unknown) => void): void {
    this.#broken.push(callback);
  }

  close(): void {
    this.#closed = true;
    for (const transport of this.#transports) transport.close();
    this.#transports.clear();
  }
}

function checkBinding(binding: unknown): NativeAbilityBinding {
  if (
    binding === null || (typeof binding !== 'object' && typeof binding !== 'function') ||
    typeof (binding as Partial<NativeAbilityBinding>).connectAbility !== 'function'
  ) {
    throw new SvcConfigurationError(
      'cloudflareNativeRpc needs a binding to a service entrypoint with a connectAbility method',
    );
  }
  return binding as NativeAbilityBinding;
}

/**
 * Native Workers RPC caller transport over `binding` (a service binding to the service's
 * entrypoint offering `connectAbility`). A long-lived session: the budget it opens with bounds
 * every call on it. An ingress-protected service accepts only brokered tokens over it.
 */
export function cloudflareNativeRpc(binding: NativeAbilityBinding): RpcTransportFactory {
  const checked = checkBinding(binding);
  return {
    kind: 'cloudflare-binding-rpc',
    open(meta: OutboundRpcMetadata, target?: RpcOpenTarget): OpenedRpcSession {
      if (target === undefined) {
        throw new SvcInternalError('cloudflareNativeRpc needs the ability id to connect', {
          reason: 'rpc_route_unknown',
        });
      }
      const local = new NativeSessionMain(checked, {
        abilityId: target.abilityId,
        ...metadataFields(meta),
      });
      const main = new RpcStub(local) as unknown as RpcMainStub;
      let closed = false;
      return {
        main,
        acceptsCalls: () => !closed,
        onBroken: (callback) => local.onBroken(callback),
        close() {
          if (closed) return;
          closed = true;
          local.close();
          main[Symbol.dispose]();
        },
      };
    },
  };
}
