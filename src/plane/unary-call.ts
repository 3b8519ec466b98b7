/**
 * One unary call of a front door over the transport the invocation chose: open the RPC session
 * with the request's metadata, `authenticate(token)` with the method pipelined on it (one
 * HTTP-batch round trip), close. A caller-side session (`abilitySession`) keeps credentials and
 * batches across calls; a front-door call has one token and one call, and needs none of that.
 *
 * A 401 refused the token, not the call: `authenticate` failed, so the method pipelined on it
 * never ran. The token is then minted afresh once (a reused token the service stopped accepting,
 * say after a signing-key change) and the call sent again; any other failure, and a second 401,
 * is the answer. The plane never retries a call the service received.
 *
 * @module
 */
import { callerWaitMs } from '../core/deadline.ts';
import { svcErrorInfo, SvcTimeoutError } from '../core/errors.ts';
import { startSharedTimeout } from '../core/shared-timeout.ts';
import type {
  OpenedRpcSession,
  OutboundRpcMetadata,
  RpcTransportFactory,
} from '../caller/transports/outbound-metadata.ts';

/** What one call sends and how it is bounded. */
export interface UnaryCallRequest {
  transport: RpcTransportFactory;
  abilityId: string;
  method: string;
  input: unknown;
  /** Metadata forwarded with the call; its `timeoutMs` is replaced by what is left at send. */
  metadata: Omit<OutboundRpcMetadata, 'timeoutMs'>;
  /** Absolute epoch ms at which the budget ends; absent when unbounded. */
  deadline?: number;
  /** Aborting it closes the session (the client went away). */
  signal?: AbortSignal;
  /** The token to present; `refusedToken` names one the service refused, never to be returned. */
  token(refusedToken?: string): Promise<string>;
}

function timeoutOf(request: UnaryCallRequest): SvcTimeoutError {
  return new SvcTimeoutError(
    `${request.abilityId}.${request.method} did not answer within its budget`,
    { reason: 'deadline_exceeded' },
  );
}

/** One attempt: a session opened, authenticated, called and closed. */
function attempt(request: UnaryCallRequest, token: string): Promise<unknown> {
  const remaining = request.deadline === undefined ? undefined : request.deadline - Date.now();
  if (remaining !== undefined && remaining <= 0) return Promise.reject(timeoutOf(request));
  const opened = request.transport.open(
    remaining === undefined ? request.metadata : { ...request.metadata, timeoutMs: remaining },
    { abilityId: request.abilityId },
  );
  // Nothing to race the answer against: the call, then the close, whatever it settled to.
  if (remaining === undefined && request.signal === undefined) {
    return answerOf(opened, request, token);
  }
  return new Promise<unknown>((resolve, reject) => {
    new BoundedAttempt(opened, request, resolve, reject).start(token, remaining);
  });
}

async function answerOf(
  opened: OpenedRpcSession,
  request: UnaryCallRequest,
  token: string,
): Promise<unknown> {
  try {
    return await opened.main.authenticate(token)[request.method](request.input);
  } finally {
    opened.close();
  }
}

/**
 * An attempt raced against the client going away (`signal`) and the budget running out: the
 * first to come settles it and closes the session. An object rather than closures: it is
 * built for every call a front door makes with a signal or a deadline.
 */
class BoundedAttempt {
  #stopTimeout: (() => void) | undefined;
  #settled = false;

  constructor(
    private readonly opened: OpenedRpcSession,
    private readonly request: UnaryCallRequest,
    private readonly resolve: (output: unknown) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  start(token: string, remaining: number | undefined): void {
    const signal = this.request.signal;
    if (signal?.aborted) return this.handleEvent();
    signal?.addEventListener('abort', this, { once: true });
    if (remaining !== undefined) {
      // The service's own verdict normally arrives first; this bounds a peer that never answers.
      this.#stopTimeout = startSharedTimeout(
        callerWaitMs(remaining),
        () => this.#finish(false, timeoutOf(this.request)),
      );
    }
    const ability = this.opened.main.authenticate(token);
    Promise.resolve(ability[this.request.method](this.request.input)).then(
      (output) => this.#finish(true, output),
      (error) => this.#finish(false, error),
    );
  }

  /** The signal's `abort` (an `EventListener` object). */
  handleEvent(): void {
    this.#finish(false, this.request.signal!.reason);
  }

  #finish(ok: boolean, value: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#stopTimeout?.();
    this.request.signal?.removeEventListener('abort', this);
    this.opened.close();
    if (ok) this.resolve(value);
    else this.reject(value);
  }
}

/** Makes the call (see the module documentation for the one fresh-token resend). */
export async function unaryCall(request: UnaryCallRequest): Promise<unknown> {
  const token = await request.token();
  try {
    return await attempt(request, token);
  } catch (error) {
    const info = svcErrorInfo(error);
    if (info.code !== 'capability_auth' || info.status !== 401) throw error;
    return await attempt(request, await request.token(token));
  }
}
