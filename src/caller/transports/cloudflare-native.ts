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
import { sessionExportCounter } from '../../service/session-export-count.ts';
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

/** A connection and how to tell that nothing on it is in use any more. */
interface NativeConnection {
  transport: ByteStreamRpcTransport;
  /** Whether the session holds no more entries than it opened with (no stream still read). */
  idle(): boolean;
}

/**
 * One opened session (one batch of calls): each `authenticate` connects once; all its
 * connections close together, at once (`close`) or once idle (`finish`).
 */
class NativeSessionMain extends RpcTarget {
  #binding: NativeAbilityBinding;
  #request: Omit<ConnectAbilityRequest, 'token' | 'messages'>;
  #connections = new Set<NativeConnection>();
  #broken: ((error: unknown) => void)[] = [];
  #closed = false;
  #whenEnded: (() => void) | undefined;

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
    const session = new RpcSession(transport);
    // A streamed result is fed through a writable stub this end exports to the service; the
    // service releases it once the stream ended. (After a cancel, Cap'n Web 0.12 leaves the
    // rejected write's promise exported: that connection ends with the session.)
    const exports = sessionExportCounter(session);
    const opened = exports();
    const connection = { transport, idle: () => exports() <= opened };
    this.#connections.add(connection);
    transport.onClosed(() => {
      this.#connections.delete(connection);
      if (!this.#closed) { for (const callback of this.#broken) callback(connectionLost()); }
      if (this.#connections.size === 0) this.#whenEnded?.();
    });
    return session.getRemoteMain();
  }

  onBroken(callback: (error: unknown) => void): void {
    this.#broken.push(callback);
  }

  close(): void {
    this.#closed = true;
    for (const { transport } of this.#connections) transport.close();
  }

  /** Ends each connection once nothing on it is in use; then runs `ended`. */
  finish(ended: () => void): void {
    this.#closed = true;
    if (this.#connections.size === 0) return ended();
    this.#whenEnded = ended;
    for (const { transport, idle } of this.#connections) transport.closeOnceIdle(idle);
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
 * entrypoint offering `connectAbility`). Per call, as HTTP-batch: the calls made together
 * connect once, carrying the budget left when they were made; a connection that returned a
 * stream stays open until the stream ends or is cancelled. An ingress-protected service accepts
 * only brokered tokens over it.
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
      // Per call: the calls made in this turn travel together, with the budget left now.
      let sealed = false;
      queueMicrotask(() => {
        sealed = true;
      });
      return {
        main,
        acceptsCalls() {
          return !closed && !sealed;
        },
        onBroken(callback) {
          local.onBroken(callback);
        },
        // After `finish`, `close` still ends a connection kept open for a stream.
        close() {
          local.close();
          if (closed) return;
          closed = true;
          main[Symbol.dispose]();
        },
        finish(ended) {
          if (closed) return;
          closed = true;
          local.finish(ended);
          main[Symbol.dispose]();
        },
      };
    },
  };
}
