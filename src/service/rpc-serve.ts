/**
 * Serves one ability's RPC route over Cap'n Web: a `POST` is an HTTP batch, an
 * `Upgrade: websocket` request opens a WebSocket session, anything else is refused.
 *
 * A batch body is counted as it streams in and refused with 413 past `maxBatchBytes` (or
 * `maxBatchMessages`), so a hostile caller cannot make the service buffer without bound. Cap'n
 * Web's own limits (`maxDepth`, `maxMessageSize`, `maxBigIntDigits`) stay on for every session;
 * `limits` may tighten or loosen them but never switch one off.
 *
 * Every error a session sends passes one last check: an error without a taxonomy `code` (a
 * serialisation failure quoting the value it could not send, an `Error` inside a handler's
 * output, one of Cap'n Web's own) is replaced with an opaque internal error, because its message
 * was never written for the caller.
 *
 * @module
 */
import { type RpcLimits, RpcSession, type RpcTarget, type RpcTransport } from 'capnweb';
import { BODY_ABANDONED_HEADERS, BodyReadTimeout, readBoundedText } from '../core/bounded-body.ts';
import { MAX_TIMER_DELAY_MS } from '../core/deadline.ts';
import {
  CapabilityAuthError,
  hasSvcErrorShape,
  isRetryableStatusByDefault,
  SvcConfigurationError,
  SvcInternalError,
} from '../core/errors.ts';
import { problemResponse } from '../core/problem.ts';
import { peerMessageRefusal } from './peer-message-screen.ts';
import { WebSocketRpcTransport } from './websocket-rpc-transport.ts';
import {
  isWebSocketUpgradeRequest,
  resolveWebSocketUpgrader,
  type WebSocketUpgrader,
} from './websocket-upgrade.ts';
import { runOnNextTask } from '../core/next-task-queue.ts';
import { withoutStackCapture } from '../core/stackless.ts';
import { wholeTextResponse } from '../core/whole-text-body.ts';

/** The transport a session arrived on. */
export type RpcServeTransport = 'http-batch' | 'websocket';

/** What `createMain` learns about the session it creates a main object for. */
export interface RpcMainMeta {
  transport: RpcServeTransport;
  request: Request;
  /**
   * On a WebSocket session: to be called once a token was accepted. A session that has not
   * authenticated within its deadline is aborted, so an unauthenticated peer cannot hold a
   * connection open indefinitely.
   */
  authenticated?(): void;
}

/** Options of {@link serveRpc}. */
export interface ServeRpcOptions {
  /** Creates the main object (`authenticate(token, proof?)`) of one session. */
  createMain(meta: RpcMainMeta): RpcTarget;
  /** The ability's `rpc.transports`; only `http-batch` and `websocket` are served here. */
  transports: readonly string[];
  /** Upgrader to use instead of the one found on `runtime` or by feature detection. */
  upgrader?: WebSocketUpgrader;
  /** The env or server object a serving helper passed to `fetch`. */
  runtime?: unknown;
  /** Largest HTTP-batch body in bytes; default {@link DEFAULT_MAX_BATCH_BYTES}. Past it: 413. */
  maxBatchBytes?: number;
  /** Most messages in one HTTP batch; default {@link DEFAULT_MAX_BATCH_MESSAGES}. Past it: 413. */
  maxBatchMessages?: number;
  /**
   * How long an HTTP-batch body may take to arrive, in milliseconds; default
   * {@link DEFAULT_BATCH_BODY_TIMEOUT_MS}. Past it the body is dropped and the answer is 408.
   */
  batchBodyTimeoutMs?: number;
  /**
   * Most calls and references the peer may hold in one WebSocket session at once (its unreleased
   * calls and unanswered stream writes); default {@link DEFAULT_MAX_SESSION_ENTRIES}. Past it the
   * session is aborted and the socket closed. The service's own stream writes do not count.
   */
  maxSessionEntries?: number;
  /**
   * How long a WebSocket session may stay open without an accepted token, in milliseconds;
   * default {@link WEBSOCKET_AUTHENTICATE_TIMEOUT_MS}. Past it the session is aborted with a
   * 401 `authentication_timeout`.
   */
  authenticateTimeoutMs?: number;
  /** Overrides of Cap'n Web's receive limits; each must be a positive integer. */
  limits?: Partial<RpcLimits>;
  /** The request's id, carried in the body of every refusal so a caller can quote it. */
  requestId?: string;
  /**
   * Told of the first error that was about to leave a session without a taxonomy `code`, after
   * it was replaced with {@link WITHHELD_ERROR_MESSAGE} (every one is replaced; one is told, so a
   * result carrying many errors cannot flood the log); a throw is ignored.
   */
  onErrorReplaced?(error: Error): void;
  /**
   * Told when a session is aborted for what its peer sent (a malformed or refused message, a
   * limit passed), with the abort's reason; not for a peer that just went away. Errors that were
   * an abort's reason are reported here, never to `onErrorReplaced`. A throw is ignored.
   */
  onSessionAborted?(reason: unknown): void;
}

/**
 * The member by which a batch's main object may say, once the batch is answered, that its
 * session has nothing to dispose (a method returning `true`): the session is then left to the
 * garbage collector instead of being ended, which costs Cap'n Web a walk of every table per
 * batch. Any other main's session is ended, disposing what it exported.
 */
export const BATCH_SESSION_DISPOSES_NOTHING: unique symbol = Symbol(
  'svcplane.batchSessionDisposesNothing',
);

/** Whether `main` says its answered batch session has nothing to dispose; a throw says no. */
function disposesNothing(main: RpcTarget): boolean {
  const says = (main as { [BATCH_SESSION_DISPOSES_NOTHING]?: unknown })[
    BATCH_SESSION_DISPOSES_NOTHING
  ];
  if (typeof says !== 'function') return false;
  try {
    return says.call(main) === true;
  } catch {
    return false;
  }
}

/** Default largest HTTP-batch body: 4 MiB. */
export const DEFAULT_MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * Default time an HTTP-batch body may take to arrive: the body is read before any token is
 * checked, so without it a stranger could hold up to the size limit per connection for as long
 * as the server keeps the connection open.
 */
export const DEFAULT_BATCH_BODY_TIMEOUT_MS = 10_000;

/** Default most messages in one HTTP batch (a real batch carries a handful). */
export const DEFAULT_MAX_BATCH_MESSAGES = 10_000;

/**
 * Default most entries a peer may create in one WebSocket session: each call it pushed and has not
 * released is one, so this is also the most calls a peer can have outstanding, as in a batch.
 */
export const DEFAULT_MAX_SESSION_ENTRIES = 10_000;

/** How long a WebSocket session may stay open before a token is accepted on it. */
export const WEBSOCKET_AUTHENTICATE_TIMEOUT_MS = 10_000;

/** The message a caller receives instead of an error that carries no taxonomy `code`. */
export const WITHHELD_ERROR_MESSAGE = 'Svc RPC failed: error details withheld';

const LIMIT_NAMES: readonly (keyof RpcLimits)[] = ['maxBigIntDigits', 'maxDepth', 'maxMessageSize'];

function requirePositiveInteger(value: unknown, label: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new SvcConfigurationError(`serveRpc: ${label} must be a positive integer`, {
      reason: 'invalid_rpc_limits',
    });
  }
  return value;
}

/** Keeps only known limits, each a positive integer: a limit can be changed, not removed. */
function checkedLimits(limits: Partial<RpcLimits> | undefined): Partial<RpcLimits> {
  const checked: Partial<RpcLimits> = {};
  if (limits === undefined) return checked;
  for (const name of LIMIT_NAMES) {
    if (limits[name] !== undefined) {
      checked[name] = requirePositiveInteger(limits[name], `limits.${name}`);
    }
  }
  return checked;
}

function opaqueSendError(): SvcInternalError {
  const opaque = new SvcInternalError(WITHHELD_ERROR_MESSAGE, { reason: 'error_withheld' });
  // Cap'n Web sends a replacement's stack, and this one would show service file paths.
  Object.defineProperty(opaque, 'stack', { value: undefined, writable: true, configurable: true });
  return opaque;
}

/**
 * Cap'n Web's `onSendError` for one session: it sees every `Error` the session serialises,
 * thrown or inside a value. Taxonomy errors, ours or received with a valid `code` from a hop
 * further down, go as they are (Cap'n Web drops their stack); anything else is replaced.
 */
function unshapedErrorReplacer(
  options: ServeRpcOptions,
  aborts: SessionAbortWatch,
): (error: Error) => Error | undefined {
  // One report per session: error values inside a result (a caller can send errors as data, and
  // a handler may echo its input) would otherwise make one request log thousands of failures.
  let reported = false;
  return (error) => {
    if (hasSvcErrorShape(error)) return undefined;
    const unknownMember = unknownMemberRefusal(error);
    if (unknownMember !== undefined) return unknownMember;
    // Cap'n Web serialises an abort's reason before it tells the transport of the abort, so
    // the report waits a microtask to tell a protocol failure from a handler's.
    queueMicrotask(() => {
      // A reply that fails once the connection is gone (Cap'n Web cannot serialise it for a
      // session that lost its peer) reaches nobody and tells of no handler failure.
      if (reported || aborts.isAbortReason(error) || aborts.connectionEnded()) return;
      reported = true;
      try {
        options.onErrorReplaced?.(error);
      } catch {
        // Reporting is a side channel; the caller still gets the opaque error.
      }
    });
    return opaqueSendError();
  };
}

// Cap'n Web's refusals of a call to something the target does not offer: a method that does
// not exist, an instance property, a member of a value that cannot be sent.
const UNKNOWN_MEMBER_MESSAGES = [
  /^'(.*)' is not a function\.$/s,
  /^Attempted to access property '(.*?)', which is an instance property/s,
  /^'(.*?)' is not a serializable type/s,
];
/** Longest member name quoted back to the caller. */
const MAX_QUOTED_MEMBER_LENGTH = 128;

/**
 * A call to a member the target does not offer is the caller's mistake, not a handler's: it
 * gets its own refusal (404, reason `unknown_method`, quoting the caller's own name for it) and
 * no handler-failure report.
 */
function unknownMemberRefusal(error: Error): SvcInternalError | undefined {
  if (!(error instanceof TypeError)) return undefined;
  for (const pattern of UNKNOWN_MEMBER_MESSAGES) {
    const match = pattern.exec(error.message);
    if (match === null) continue;
    const name = match[1].slice(0, MAX_QUOTED_MEMBER_LENGTH);
    const refusal = new SvcInternalError(`No method ${JSON.stringify(name)} on this RPC target`, {
      status: 404,
      reason: 'unknown_method',
    });
    Object.defineProperty(refusal, 'stack', {
      value: undefined,
      writable: true,
      configurable: true,
    });
    return refusal;
  }
  return undefined;
}

/** Reports a session's abort once, and tells which error was its reason. */
interface SessionAbortWatch {
  aborted(reason: unknown): void;
  /** Whether `error` ended the session (its abort, or its connection's end): not a handler's. */
  isAbortReason(error: unknown): boolean;
  /** Teaches the watch the transport's own failures (the peer closed, the connection broke). */
  endsWith(isTransportFailure: (error: unknown) => boolean, failed: () => boolean): void;
  /** Whether the session's connection has ended (its transport failed). */
  connectionEnded(): boolean;
}

/** A session's transport before it tells of its own failures: it has none. */
const neverFailed = (): boolean => false;

function watchSessionAbort(options: ServeRpcOptions): SessionAbortWatch {
  let reported = false;
  let abortReason: unknown;
  let isTransportFailure: (error: unknown) => boolean = neverFailed;
  let transportFailed: () => boolean = neverFailed;
  return {
    aborted(reason) {
      if (reported) return;
      reported = true;
      abortReason = reason;
      try {
        options.onSessionAborted?.(reason);
      } catch {
        // Reporting is a side channel.
      }
    },
    // Cap'n Web aborts a session whose connection ended with that failure as the reason, and
    // serialises it like any error: it is the session's end, never a handler failure.
    isAbortReason(error) {
      return (reported && error === abortReason) || isTransportFailure(error);
    },
    endsWith(predicate, failed) {
      isTransportFailure = predicate;
      transportFailed = failed;
    },
    connectionEnded() {
      return transportFailed();
    },
  };
}

/**
 * The error check of a session served elsewhere than on an HTTP route (a native binding): every
 * error it sends without a taxonomy `code` is replaced, as on the routes, and the first one is
 * reported to `onErrorReplaced` unless the connection had already ended (`connectionEnded`).
 */
export function sessionErrorReplacer(
  options: Pick<ServeRpcOptions, 'onErrorReplaced'>,
  connectionEnded: () => boolean,
): (error: Error) => Error | undefined {
  const serveOptions = options as ServeRpcOptions;
  const aborts = watchSessionAbort(serveOptions);
  aborts.endsWith(() => false, connectionEnded);
  return unshapedErrorReplacer(serveOptions, aborts);
}

function allowedMethods(transports: readonly string[]): string {
  const methods: string[] = [];
  if (transports.includes('websocket')) methods.push('GET');
  if (transports.includes('http-batch')) methods.push('POST');
  return methods.join(', ');
}

/** What a refusal of this route says; the request id, when known, is added to it. */
interface Refusal {
  status: 400 | 405 | 408 | 413 | 426;
  reason: string;
  detail: string;
  headers?: HeadersInit;
}

function refuse(options: ServeRpcOptions, refusal: Refusal): Response {
  return problemResponse({
    code: 'internal',
    // Errors r2: a stalled upload (408) is worth retrying; the other refusals are not.
    retryable: isRetryableStatusByDefault(refusal.status),
    ...refusal,
    ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
  });
}

function methodNotAllowed(options: ServeRpcOptions, detail: string): Response {
  return refuse(options, {
    status: 405,
    reason: 'rpc_transport_not_enabled',
    detail,
    headers: { Allow: allowedMethods(options.transports) },
  });
}

export { readBoundedText } from '../core/bounded-body.ts';

/**
 * Why a served batch's session ends once its response is taken. One frozen value for every
 * batch: building an `Error` per batch costs several microseconds on some engines (Deno) even
 * without a stack, and nothing ever reads this one beyond its identity and taxonomy. Its fields
 * are not enumerable: Cap'n Web serialises an ending session's reason for an abort message (one
 * no one receives, here) field by field, each one it enumerates.
 */
const BATCH_ANSWERED: SvcInternalError = withoutStackCapture(() =>
  new SvcInternalError('The RPC batch was answered; its session has ended', {
    reason: 'rpc_batch_answered',
  })
);
for (const key of Object.keys(BATCH_ANSWERED)) {
  Object.defineProperty(BATCH_ANSWERED, key, { enumerable: false });
}
Object.freeze(BATCH_ANSWERED);

/**
 * Server end of one batch: hands the request lines to the session, collects what it sends, and
 * says when every line was read. Once the response body is taken, later sends are dropped; when
 * told to end, the session's pending read fails with {@link BATCH_ANSWERED}, which ends it
 * (disposing what it exported) without an error built for it.
 */
class BatchServerTransport implements RpcTransport {
  #incoming: string[];
  #outgoing: string[] | null = [];
  #allReceived: Promise<void>;
  #markAllReceived!: () => void;
  #markAborted!: (reason: unknown) => void;
  #endRead: ((reason: unknown) => void) | undefined;
  #aborts: SessionAbortWatch;

  constructor(lines: string[], aborts: SessionAbortWatch) {
    this.#incoming = lines;
    this.#aborts = aborts;
    this.#allReceived = new Promise<void>((resolve, reject) => {
      this.#markAllReceived = resolve;
      this.#markAborted = reject;
    });
    this.#allReceived.catch(() => {});
  }

  send(message: string): void {
    this.#outgoing?.push(message);
  }

  receive(): Promise<string> {
    const next = this.#incoming.shift();
    if (next !== undefined) {
      const refusal = peerMessageRefusal(next, 'service');
      return refusal === undefined ? Promise.resolve(next) : Promise.reject(refusal);
    }
    if (this.#outgoing === null) return Promise.reject(BATCH_ANSWERED);
    this.#markAllReceived();
    // The batch has no more lines; the session stays open until its calls are answered.
    return new Promise((_, reject) => {
      this.#endRead = reject;
    });
  }

  abort(reason: unknown): void {
    // Once the response is taken the batch is over: ending the session is no failure.
    if (this.#outgoing !== null) this.#aborts.aborted(reason);
    this.#markAborted(reason);
  }

  whenAllReceived(): Promise<void> {
    return this.#allReceived;
  }

  /** The response body; from now on what the session sends is dropped. */
  takeBody(): string {
    const body = (this.#outgoing ?? []).join('\n');
    this.#outgoing = null;
    return body;
  }

  /** Ends the session once its body was taken: its pending (or next) read fails. */
  end(): void {
    this.#endRead?.(BATCH_ANSWERED);
    this.#endRead = undefined;
  }
}

async function serveHttpBatch(request: Request, options: ServeRpcOptions): Promise<Response> {
  const maxBytes = options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES;
  const maxMessages = options.maxBatchMessages ?? DEFAULT_MAX_BATCH_MESSAGES;
  const timeoutMs = options.batchBodyTimeoutMs === undefined
    ? DEFAULT_BATCH_BODY_TIMEOUT_MS
    : Math.min(
      requirePositiveInteger(options.batchBodyTimeoutMs, 'batchBodyTimeoutMs'),
      MAX_TIMER_DELAY_MS,
    );
  let text: string | undefined;
  try {
    text = await readBoundedText(request, maxBytes, { timeoutMs });
  } catch (error) {
    if (error instanceof BodyReadTimeout) {
      return refuse(options, {
        status: 408,
        reason: 'rpc_batch_timeout',
        detail: 'The RPC batch body did not arrive in time',
        headers: BODY_ABANDONED_HEADERS,
      });
    }
    // The body stream failed: the client went away or broke the framing mid-body. Its own
    // doing, so a 400 (logged as a completed request), never a server failure at error level.
    return refuse(options, {
      status: 400,
      reason: 'rpc_batch_unreadable',
      detail: 'The RPC batch body could not be read to its end',
      headers: BODY_ABANDONED_HEADERS,
    });
  }
  if (text === undefined) {
    return refuse(options, {
      status: 413,
      reason: 'rpc_batch_too_large',
      detail: `RPC batch body exceeds ${maxBytes} bytes`,
    });
  }
  const lines = text === '' ? [] : text.split('\n');
  if (lines.length > maxMessages) {
    return refuse(options, {
      status: 413,
      reason: 'rpc_batch_too_large',
      detail: `RPC batch exceeds ${maxMessages} messages`,
    });
  }
  const aborts = watchSessionAbort(options);
  const transport = new BatchServerTransport(lines, aborts);
  const main = options.createMain({ transport: 'http-batch', request });
  const session = new RpcSession(transport, main, {
    limits: checkedLimits(options.limits),
    onSendError: unshapedErrorReplacer(options, aborts),
  });
  try {
    await transport.whenAllReceived();
    await session.drain();
  } catch {
    // The session aborted (a limit was exceeded, a message was malformed). Its abort message
    // is already in the outgoing batch, so the caller learns why from the body.
  }
  const body = transport.takeBody();
  // Ending the session disposes what it exported (nothing can reach it after the response).
  // That takes Cap'n Web a walk of every table, which the response need not wait for: it runs
  // on the next task, once the runtime has the response to write; and not at all when the
  // main knows there is nothing to dispose (no reference to the session outlives the answer).
  if (!disposesNothing(main)) runOnNextTask(() => transport.end());
  return wholeTextResponse(
    body,
    { headers: { 'Content-Type': 'text/plain; charset=utf-8' } },
    options.runtime,
  );
}

function serveWebSocket(request: Request, options: ServeRpcOptions): Response | Promise<Response> {
  const upgrader = resolveWebSocketUpgrader(options.runtime, options.upgrader);
  if (upgrader === undefined) {
    // Either the handshake was incomplete (no `Connection: Upgrade`, so the server took it for a
    // plain request) or the server cannot upgrade at all; the detail names both.
    return refuse(options, {
      status: 426,
      reason: 'websocket_upgrade_unavailable',
      detail: 'This request could not be upgraded to WebSocket: send a complete handshake ' +
        '(Connection: Upgrade) to a server that upgrades (serveNode, serveBun, serveDeno, ' +
        'workersEntrypoint, or an explicit upgrader)',
      headers: { Upgrade: 'websocket', Connection: 'Upgrade' },
    });
  }
  const limits = checkedLimits(options.limits);
  const maxEntries = options.maxSessionEntries === undefined
    ? DEFAULT_MAX_SESSION_ENTRIES
    : requirePositiveInteger(options.maxSessionEntries, 'maxSessionEntries');
  const authenticateTimeoutMs = options.authenticateTimeoutMs === undefined
    ? WEBSOCKET_AUTHENTICATE_TIMEOUT_MS
    : Math.min(
      requirePositiveInteger(options.authenticateTimeoutMs, 'authenticateTimeoutMs'),
      MAX_TIMER_DELAY_MS,
    );
  // Some runtimes (Deno) close the original request once it is upgraded, headers included;
  // the session keeps a detached copy of what it may still want to read.
  const upgradeRequest = new Request(request.url, { method: 'GET', headers: request.headers });
  return upgrader.upgrade(request, options.runtime, (socket) => {
    const aborts = watchSessionAbort(options);
    const transport = new WebSocketRpcTransport(socket, {
      receiver: 'service',
      onSessionAborted: aborts.aborted,
    });
    aborts.endsWith((error) => transport.isOwnFailure(error), () => transport.failed);
    let stopAuthenticateDeadline = () => {};
    try {
      const main = options.createMain({
        transport: 'websocket',
        request: upgradeRequest,
        authenticated: () => stopAuthenticateDeadline(),
      });
      const session = new RpcSession(transport, main, {
        limits,
        onSendError: unshapedErrorReplacer(options, aborts),
      });
      transport.limitEntries(session, maxEntries);
      stopAuthenticateDeadline = transport.abortAfter(
        authenticateTimeoutMs,
        () =>
          new CapabilityAuthError(
            `No capability token was accepted within ${authenticateTimeoutMs} ms of opening ` +
              'the WebSocket session',
            { status: 401, reason: 'authentication_timeout' },
          ),
      );
    } catch (error) {
      transport.abort(error);
    }
  });
}

/**
 * Serves one request to an ability's RPC route. `POST` without an upgrade is an HTTP batch
 * (405 unless `http-batch` is enabled); `Upgrade: websocket` opens a session (405 unless
 * `websocket` is enabled, 426 when no upgrader is available); anything else is 405.
 * Refusals are RFC 9457 problem bodies carrying `requestId` when one is given.
 */
export async function serveRpc(request: Request, options: ServeRpcOptions): Promise<Response> {
  if (isWebSocketUpgradeRequest(request)) {
    if (!options.transports.includes('websocket')) {
      return methodNotAllowed(
        options,
        'WebSocket is not an enabled transport of this ability',
      );
    }
    if (request.method !== 'GET') {
      return methodNotAllowed(options, 'A WebSocket upgrade must be a GET request');
    }
    return await serveWebSocket(request, options);
  }
  if (request.method === 'POST') {
    if (!options.transports.includes('http-batch')) {
      return methodNotAllowed(
        options,
        'HTTP-batch is not an enabled transport of this ability',
      );
    }
    return await serveHttpBatch(request, options);
  }
  return methodNotAllowed(
    options,
    `${request.method} is not an RPC request: POST a batch or upgrade to WebSocket`,
  );
}
