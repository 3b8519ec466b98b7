/**
 * The HTTP-batch caller transport: every call made within one macrotask travels in one POST,
 * together with `authenticate`, and the batch's response ends that Cap'n Web session.
 *
 * Cap'n Web's stock batch client flushes on `setTimeout(0)`, which runtimes clamp to at least a
 * millisecond. A microtask would be too early: the `pull` an `await` triggers would miss the
 * batch. So the batch goes out on the next macrotask without a clamp: `setImmediate` where it
 * exists, else a `MessageChannel` message.
 *
 * @module
 */
import { RpcSession, RpcTarget, type RpcTransport } from 'capnweb';
import { discardBody, markServerFramedBody, readBoundedText } from '../../core/bounded-body.ts';
import { refuseUnknownKeys } from '../../core/config-values.ts';
import { hasSvcErrorShape, SvcConfigurationError, SvcInternalError } from '../../core/errors.ts';
import {
  type OpenedRpcSession,
  type OutboundRpcMetadata,
  type RpcMainStub,
  type RpcOpenTarget,
  type RpcTransportFactory,
  withMetadataHeaders,
} from './outbound-metadata.ts';
import { peerMessageRefusal } from '../../service/peer-message-screen.ts';
import { nextMacrotask } from '../../core/next-macrotask.ts';
import { stacklessError } from '../../core/stackless.ts';
import { wholeTextRequest } from '../../core/whole-text-body.ts';

/** A `fetch`-like function: how a caller reaches an in-process service or a service binding. */
export type RpcFetch = (request: Request) => Promise<Response>;

/** Options of {@link httpBatchRpc}. */
export interface HttpBatchRpcOptions {
  /**
   * RPC URL used with a `fetch` function target. Default `https://svc.internal/rpc/<abilityId>`
   * (the default `rpc.path`); set it when the ability declares another path.
   */
  url?: string | URL;
}

/** A Cloudflare service binding (a `Fetcher`): anything with a `fetch(request)` method. */
export interface ServiceBindingFetcher {
  /** Delivers one request to the bound Worker and resolves with its response. */
  fetch(request: Request): Promise<Response>;
}

/** Most ability routes one transport remembers (a transport usually serves one ability). */
const MAX_REMEMBERED_ROUTES = 64;

/**
 * Largest batch response a caller reads (32 MiB, the WebSocket message limit): a hostile or
 * broken service cannot make the caller buffer without end. Past it the batch fails.
 */
export const MAX_BATCH_RESPONSE_BYTES = 32 * 1024 * 1024;
/** Largest refusal body read for its problem details; a larger one is dropped unread. */
const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/** The headers of every batch, before its metadata. */
const BATCH_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Type': 'text/plain; charset=utf-8',
});

/** Base URL of in-process and binding routes; the host is never resolved. */
const INTERNAL_ORIGIN = 'https://svc.internal';

export { nextMacrotask } from '../../core/next-macrotask.ts';

/** Reads a refused batch as an error carrying the service's own taxonomy fields when it sent any. */
async function refusedBatchError(response: Response): Promise<Error> {
  const status = response.status;
  let problem: Record<string, unknown> | undefined;
  if ((response.headers.get('content-type') ?? '').includes('json')) {
    try {
      const text = await readBoundedText(response, MAX_REFUSAL_BODY_BYTES);
      const body: unknown = text === undefined ? undefined : JSON.parse(text);
      if (body !== null && typeof body === 'object') problem = body as Record<string, unknown>;
    } catch {
      problem = undefined;
    }
  } else {
    await response.body?.cancel().catch(() => {});
  }
  const detail = typeof problem?.detail === 'string' ? problem.detail.slice(0, 500) : undefined;
  const error = new SvcInternalError(
    `RPC request failed: ${status}${detail !== undefined ? ` (${detail})` : ''}`,
    { reason: 'rpc_request_refused', status: status >= 400 && status <= 599 ? status : 502 },
  );
  // A problem body's taxonomy fields win; svcErrorInfo re-validates them as for any peer error.
  if (problem !== undefined) {
    for (const key of ['code', 'status', 'retryable', 'reason'] as const) {
      if (problem[key] !== undefined) {
        (error as unknown as Record<string, unknown>)[key] = problem[key];
      }
    }
  }
  return error;
}

/**
 * A batch that never got its answer (the service unreachable, the connection dropped mid-answer):
 * a transient failure a caller may retry, as a plane that cannot be reached is. The original is
 * kept as `cause`.
 */
function connectionFailure(cause: unknown): SvcInternalError {
  const error = new SvcInternalError(
    'The RPC batch got no answer: the service could not be reached',
    {
      reason: 'rpc_connection_failed',
      status: 503,
    },
  );
  Object.defineProperty(error, 'cause', { value: cause, enumerable: false, configurable: true });
  return error;
}

/**
 * How every batch session ends: the end of its lines, not a failure. One frozen value for every
 * batch (an `Error` built per batch costs several microseconds on some engines even without a
 * stack); a stub the session handed out answers it when called after the batch.
 */
const BATCH_ENDED: Error = Object.freeze(stacklessError('Batch RPC request ended.'));

/**
 * What a batch offers its service to call: nothing. Cap'n Web builds an `Error` for every session
 * opened without a main object, which costs microseconds per batch on some engines even with no
 * stack captured; this object, shared by every batch, has no method a call could reach (Cap'n Web
 * calls only methods a class declares, and this one declares none), so a service calling it is
 * refused all the same.
 */
class NothingToCall extends RpcTarget {}
const CALLER_MAIN: RpcTarget = Object.freeze(new NothingToCall());

/**
 * Client end of one batch: collects what the session sends until the next macrotask, posts it,
 * then feeds the response lines back. Messages sent after the batch went out are dropped: they
 * are releases and pulls for a server session that ended with its response.
 */
class BatchClientTransport implements RpcTransport {
  #outgoing: string[] | null = [];
  #incoming: string[] | null = null;
  /** Index of the next response line to hand over (shifting a long array copies it each time). */
  #next = 0;
  #aborted: unknown;
  #exchange: Promise<void>;
  #ended = false;

  constructor(post: (lines: string[]) => Promise<string[]>) {
    this.#exchange = this.#exchangeOnNextMacrotask(post);
    // Failures surface through receive(); an unobserved rejection here is not an error.
    this.#exchange.catch(() => {});
  }

  /** Whether the batch is still collecting messages. */
  get collecting(): boolean {
    return this.#outgoing !== null;
  }

  /**
   * Whether every response line was handed to the session and the end reported: the session
   * then ended itself (a transport whose `receive` rejects ends its session).
   */
  get ended(): boolean {
    return this.#ended;
  }

  send(message: string): void {
    this.#outgoing?.push(message);
  }

  async receive(): Promise<string> {
    if (this.#incoming === null) await this.#exchange;
    const next = this.#incoming?.[this.#next];
    if (next !== undefined) {
      this.#next++;
      const refusal = peerMessageRefusal(next, 'caller');
      if (refusal !== undefined) throw refusal;
      return next;
    }
    this.#ended = true;
    throw BATCH_ENDED;
  }

  abort(reason: unknown): void {
    if (this.#aborted === undefined) this.#aborted = reason ?? new Error('RPC batch aborted');
  }

  async #exchangeOnNextMacrotask(post: (lines: string[]) => Promise<string[]>): Promise<void> {
    await nextMacrotask();
    const lines = this.#outgoing ?? [];
    this.#outgoing = null;
    if (this.#aborted !== undefined) throw this.#aborted;
    this.#incoming = await post(lines);
  }
}

/**
 * Most lines an honest service answers a batch of `sent` lines with: one answer per pulled call
 * (at most one per line sent), with room for releases and an abort.
 */
function mostAnswerLines(sent: number): number {
  return 2 * sent + 16;
}

/**
 * Performs one batch's POST. `signal`, when given, is aborted if the batch is abandoned while
 * its request is in flight (its session disposed).
 */
type BatchSend = (body: string, signal: AbortSignal | undefined) => Promise<Response>;

/**
 * Opens one batch against `send`. An `abortable` batch gives its request a signal, so an
 * abandoned batch ends its connection; otherwise (a fetch function, where creating and following
 * a signal costs a share of every batch) an abandoned batch's answer is dropped unread when it
 * arrives.
 */
function openBatch(send: BatchSend, abortable: boolean): OpenedRpcSession {
  const controller = abortable ? new AbortController() : undefined;
  let answered = false;
  let abandoned = false;
  const transport = new BatchClientTransport(async (lines) => {
    let response: Response;
    let body: string | undefined;
    try {
      response = await send(lines.join('\n'), controller?.signal);
      if (abandoned) {
        await response.body?.cancel().catch(() => {});
        throw stacklessError('RPC batch abandoned');
      }
      if (!response.ok) throw await refusedBatchError(response);
      body = await readBoundedText(response, MAX_BATCH_RESPONSE_BYTES);
    } catch (cause) {
      throw hasSvcErrorShape(cause) ? cause : connectionFailure(cause);
    }
    if (body === undefined) {
      throw new SvcInternalError(
        `RPC batch response is larger than ${MAX_BATCH_RESPONSE_BYTES} bytes`,
        { reason: 'rpc_response_too_large', status: 502 },
      );
    }
    answered = true;
    const answer = body === '' ? [] : body.split('\n');
    if (answer.length > mostAnswerLines(lines.length)) {
      // Every line runs through the session in one go: an answer far longer than the batch
      // could be answered with is work a hostile service makes this process do.
      throw new SvcInternalError(
        `RPC batch response has ${answer.length} lines for a batch of ${lines.length}`,
        { reason: 'rpc_response_too_large', status: 502 },
      );
    }
    return answer;
  });
  const session = new RpcSession(transport, CALLER_MAIN);
  const main = session.getRemoteMain() as unknown as RpcMainStub;
  let closed = false;
  return {
    main,
    acceptsCalls() {
      return !closed && transport.collecting;
    },
    close() {
      if (closed) return;
      closed = true;
      // Both steps cost an exception object and its stack per batch, and are moot once the
      // exchange is over: aborting only matters for a request still in flight, and a session
      // whose transport reported the end has already ended itself.
      if (!answered) {
        abandoned = true;
        controller?.abort();
      }
      if (!transport.ended) main[Symbol.dispose]();
    },
  };
}

function isFetchFunction(target: unknown): target is RpcFetch {
  return typeof target === 'function';
}

const HTTP_BATCH_RPC_OPTIONS: readonly string[] = ['url'];

/**
 * The options with no key beyond `url`, and `url` only where it is read: with a fetch-function
 * target. Beside a URL target it would be ignored, so a batch would go where it does not say.
 */
function checkBatchOptions(
  options: unknown,
  fetchTarget: boolean,
  label: string,
): URL | undefined {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${label}: options must be an object { url? }`);
  }
  refuseUnknownKeys(options, HTTP_BATCH_RPC_OPTIONS, label);
  const url = (options as HttpBatchRpcOptions).url;
  if (url === undefined) return undefined;
  if (!fetchTarget) {
    throw new SvcConfigurationError(
      `${label}: \`url\` applies to a fetch-function target only; the target already is the URL`,
    );
  }
  try {
    return new URL(url);
  } catch {
    throw new SvcConfigurationError(`${label}: \`url\` is not an absolute URL`);
  }
}

function rpcUrlFor(target: RpcOpenTarget | undefined): URL {
  if (target === undefined) {
    throw new SvcInternalError('An in-process HTTP-batch transport needs an ability id or a url', {
      reason: 'rpc_route_unknown',
    });
  }
  return new URL(`/rpc/${target.abilityId}`, INTERNAL_ORIGIN);
}

/**
 * HTTP-batch caller transport. `target` is the ability's full RPC URL, or a `fetch`-like
 * function (an in-process service's `fetch`, a test harness), which receives each batch as a
 * `Request` for `options.url` (default `https://svc.internal/rpc/<abilityId>`).
 *
 * Metadata travels as `X-Request-Id`, `X-Svc-Timeout`, `X-Svc-Idempotency-Key` and
 * `X-Svc-Conn-Info` headers on every batch.
 */
export function httpBatchRpc(
  target: string | URL | RpcFetch,
  options: HttpBatchRpcOptions = {},
): RpcTransportFactory {
  const optionUrl = checkBatchOptions(options, isFetchFunction(target), 'httpBatchRpc');
  const fetchTarget = isFetchFunction(target) ? target : undefined;
  const fixedUrl = fetchTarget !== undefined ? optionUrl : new URL(target as string | URL);
  // Each batch opens a session: its route is parsed once per ability, not once per batch.
  const routes = new Map<string, URL>();
  const routeFor = (openTarget: RpcOpenTarget | undefined): URL => {
    const abilityId = openTarget?.abilityId;
    const known = abilityId === undefined ? undefined : routes.get(abilityId);
    if (known !== undefined) return known;
    const url = rpcUrlFor(openTarget);
    if (abilityId !== undefined && routes.size < MAX_REMEMBERED_ROUTES) routes.set(abilityId, url);
    return url;
  };
  return {
    kind: 'http-batch',
    open(meta: OutboundRpcMetadata, openTarget?: RpcOpenTarget): OpenedRpcSession {
      const url = fixedUrl ?? routeFor(openTarget);
      const headers = withMetadataHeaders(BATCH_HEADERS, meta);
      // Never followed: a redirect would carry the batch, and the token in it, to a place the
      // configuration never named. A 3xx answer fails the batch like any other refusal.
      if (fetchTarget !== undefined) {
        return openBatch(
          (body) =>
            fetchTarget(
              wholeTextRequest(url, body, { method: 'POST', headers, redirect: 'manual' }),
            ),
          false,
        );
      }
      // The global fetch builds its own request from these: no `Request` of ours first. Its
      // HTTP parser frames the answer, so a declared length within the limit is read whole.
      return openBatch(async (body, signal) => {
        const response = await fetch(url, {
          method: 'POST',
          body,
          headers,
          signal,
          redirect: 'manual',
        });
        markServerFramedBody(response, () => discardBody(response));
        return response;
      }, true);
    },
  };
}

/**
 * HTTP-batch over a Cloudflare service binding: each batch is a `binding.fetch(request)` to
 * the ability's route (default `https://svc.internal/rpc/<abilityId>`), with the same metadata
 * headers as {@link httpBatchRpc}.
 */
export function cloudflareServiceBindingRpc(
  binding: ServiceBindingFetcher,
  options: HttpBatchRpcOptions = {},
): RpcTransportFactory {
  if (binding === null || typeof binding !== 'object' || typeof binding.fetch !== 'function') {
    throw new SvcConfigurationError(
      'cloudflareServiceBindingRpc needs a binding with a fetch method',
    );
  }
  checkBatchOptions(options, true, 'cloudflareServiceBindingRpc');
  return httpBatchRpc((request) => binding.fetch(request), options);
}
