/**
 * A Cap'n Web `RpcTransport` over anything shaped like a standard `WebSocket`: the runtime's
 * own, the `ws` package on Node, Bun's server socket behind an adapter, or a Workers socket.
 *
 * Cap'n Web ships a WebSocket transport, but it compares `readyState` with the global
 * `WebSocket.CONNECTING`, which does not exist on Node 20 (and would be the wrong class for a
 * `ws` socket anyway). This transport compares with the numeric ready states the WebSocket
 * standard fixes, so no global is needed or installed.
 *
 * @module
 */
import type { RpcTransport } from 'capnweb';
import { hasSvcErrorShape, SvcInternalError } from '../core/errors.ts';
import { peerMessageRefusal, type RpcReceiver } from './peer-message-screen.ts';
import { type CountableRpcSession, sessionExportLimit } from './session-export-count.ts';

/** The subset of the standard `WebSocket` interface an RPC session uses. */
export interface RpcWebSocket {
  /** 0 connecting, 1 open, 2 closing, 3 closed (fixed by the WebSocket standard). */
  readonly readyState: number;
  /**
   * Bytes queued by `send` and not yet handed to the network. Node's `ws`, Deno and browsers
   * report it; a socket without it (Workers, Bun's server socket) is never closed for a slow
   * reader by this transport.
   */
  readonly bufferedAmount?: number;
  binaryType?: string;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  // deno-lint-ignore no-explicit-any
  addEventListener(type: string, listener: (event: any) => void): void;
}

const CONNECTING = 0;

/** Close code for an RPC-level failure; 3000-3999 is the range registered for libraries. */
const RPC_ABORT_CLOSE_CODE = 3000;

/**
 * How many bytes a socket may hold unsent for a peer that reads too slowly before the connection
 * is closed: room for two messages of the largest size a serving helper accepts (32 MiB). Without
 * a bound, a peer that stops reading while its calls are answered grows this process's memory
 * for as long as it keeps the connection open.
 */
export const MAX_WEBSOCKET_SEND_BUFFER_BYTES = 64 * 1024 * 1024;

/** How a connection ends when its peer reads too slowly: 1013, "try again later". */
export const SEND_BUFFER_FULL_CLOSE = Object.freeze({
  code: 1013,
  reason: 'send buffer full: the peer reads too slowly',
});

/**
 * How many received messages pass between two counts of a session's entries. Counting walks the
 * session's exports table, so it runs once per batch of messages: a flood passes the limit by at
 * most this many entries before the session ends.
 */
export const SESSION_ENTRY_CHECK_INTERVAL = 64;

/** What an entry limit reads: Cap'n Web's `RpcSession`. */
export type RpcSessionStats = CountableRpcSession;

/** A close frame's reason carries at most 123 UTF-8 bytes (125 minus the 2-byte code). */
const MAX_CLOSE_REASON_BYTES = 123;

/** The close reason of an abort whose error is not one of this system's own. */
const OPAQUE_ABORT_CLOSE_REASON = 'RPC session aborted';

/**
 * The close frame's reason: a taxonomy error's message, which is written for the peer; any other
 * abort (a parser's or Cap'n Web's own text, which may quote internals) reads as opaque, as the
 * abort message in the session does.
 */
function closeReason(reason: unknown): string {
  const text = reason instanceof Error && hasSvcErrorShape(reason)
    ? reason.message
    : OPAQUE_ABORT_CLOSE_REASON;
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= MAX_CLOSE_REASON_BYTES) return text;
  // A streaming decode drops a multi-byte character cut in half instead of emitting U+FFFD.
  return new TextDecoder().decode(bytes.subarray(0, MAX_CLOSE_REASON_BYTES), { stream: true });
}

/**
 * The failure of calls on a connection that ended or never opened: transient, as a service that
 * cannot be reached is, so a caller may retry on a fresh connection.
 */
function connectionLost(message: string): SvcInternalError {
  return new SvcInternalError(message, { reason: 'rpc_connection_lost', status: 503 });
}

/** Close code of an endpoint refusing a message too large to process (RFC 6455 §7.4.1). */
export const MESSAGE_TOO_BIG_CLOSE_CODE = 1009;

/**
 * What a close by the peer means for the session: the connection is lost, and the calls on it
 * may be retried on a fresh one. A peer refusing a message as too large (1009: above the serving
 * helpers' `MAX_WEBSOCKET_PAYLOAD_BYTES`, say) is no exception: the close cuts every call on the
 * socket, and which one sent the message cannot be told from here, so none is marked as not worth
 * retrying; the message names the cause.
 */
function closedByPeer(event: { code?: number; reason?: string }): SvcInternalError {
  if (event.code === MESSAGE_TOO_BIG_CLOSE_CODE) {
    return connectionLost(
      'Peer closed WebSocket: 1009, a message on this connection was larger than it accepts',
    );
  }
  return connectionLost(`Peer closed WebSocket: ${event.code ?? ''} ${event.reason ?? ''}`);
}

/**
 * The HTTP status with which the server refused a socket's upgrade, when the socket tells it: an
 * `error` event with a numeric `status` (the service-binding socket), or the status the runtime
 * names in the event's message (`ws`: "Unexpected server response: 404"; Deno: "Invalid status
 * code: 404"; Bun: "Expected 101 status code: 404"). Node's own client names none.
 */
export function refusedUpgradeStatus(event: unknown): number | undefined {
  if (event === null || typeof event !== 'object') return undefined;
  const { status, message, error } = event as {
    status?: unknown;
    message?: unknown;
    error?: unknown;
  };
  if (typeof status === 'number' && Number.isInteger(status) && status >= 100 && status <= 599) {
    return status;
  }
  const texts = [message, (error as { message?: unknown } | null | undefined)?.message];
  for (const text of texts) {
    if (typeof text !== 'string') continue;
    const found = /(?:status code:?|server response:)\s*([1-5]\d\d)\b/i.exec(text);
    if (found !== null) return Number(found[1]);
  }
  return undefined;
}

/**
 * A socket that never opened. A refused upgrade with a known status is the server's answer, not
 * a lost connection: it fails with that status (a 404 is a wrong path, not worth retrying; a 503
 * stays retryable), naming the URL as an HTTP-batch refusal names its route.
 */
function connectFailure(event: unknown, url: string | undefined): SvcInternalError {
  const where = url === undefined ? '' : ` to ${url}`;
  const status = refusedUpgradeStatus(event);
  if (status === undefined) return connectionLost(`WebSocket connection${where} failed.`);
  return new SvcInternalError(`WebSocket upgrade${where} refused: HTTP ${status}`, {
    reason: 'rpc_upgrade_refused',
    status: status >= 400 ? status : 502,
  });
}

/** Options of {@link WebSocketRpcTransport}. */
export interface WebSocketRpcTransportOptions {
  /**
   * The URL a caller's socket dialled, without its query: named in the failure of a socket that
   * never opened.
   */
  url?: string;
  /**
   * How long a socket still connecting may take to open, in milliseconds; past it the socket is
   * closed and the transport fails. Default: no limit (a server socket arrives already open).
   */
  openTimeoutMs?: number;
  /**
   * Bytes the socket may hold unsent (its `bufferedAmount`) before the connection is closed with
   * {@link SEND_BUFFER_FULL_CLOSE}. Default {@link MAX_WEBSOCKET_SEND_BUFFER_BYTES}.
   */
  maxBufferedBytes?: number;
  /**
   * Which end of the session this is, for the screen every received message passes (see
   * `peer-message-screen.ts`); default `caller`, whose screen a service end tightens.
   */
  receiver?: RpcReceiver;
  /**
   * Told when the session is aborted for a reason other than the connection's own end (a
   * message it refused, a limit passed); a peer that closes or drops is not reported.
   */
  onSessionAborted?(reason: unknown): void;
}

/** Cap'n Web transport over a WebSocket-shaped object; sends queue until the socket opens. */
export class WebSocketRpcTransport implements RpcTransport {
  #socket: RpcWebSocket;
  #sendQueue: string[] | undefined;
  #openTimer: ReturnType<typeof setTimeout> | undefined;
  #received: string[] = [];
  #waiting: { resolve(message: string): void; reject(error: unknown): void } | undefined;
  #error: unknown;
  #entryLimit: { exceeded: () => boolean; maxEntries: number } | undefined;
  #receivedSinceCount = 0;
  #maxBufferedBytes: number;
  #receiver: RpcReceiver;
  #onSessionAborted: ((reason: unknown) => void) | undefined;
  #deadlines = new Set<ReturnType<typeof setTimeout>>();
  #interruption: unknown;
  #url: string | undefined;

  constructor(socket: RpcWebSocket, options: WebSocketRpcTransportOptions = {}) {
    this.#socket = socket;
    this.#url = options.url;
    this.#receiver = options.receiver ?? 'caller';
    this.#onSessionAborted = options.onSessionAborted;
    this.#maxBufferedBytes = options.maxBufferedBytes ?? MAX_WEBSOCKET_SEND_BUFFER_BYTES;
    try {
      socket.binaryType = 'arraybuffer';
    } catch {
      // Some adapters expose a read-only binaryType; RPC messages are text anyway.
    }
    if (socket.readyState === CONNECTING) {
      this.#sendQueue = [];
      socket.addEventListener('open', () => this.#flushQueue());
      if (options.openTimeoutMs !== undefined) this.#startOpenTimer(options.openTimeoutMs);
    }
    socket.addEventListener('message', (event: { data: unknown }) => this.#onMessage(event.data));
    socket.addEventListener('close', (event: { code?: number; reason?: string }) => {
      this.#fail(closedByPeer(event));
    });
    socket.addEventListener('error', (event: unknown) => {
      const neverOpened = this.#sendQueue !== undefined;
      this.#fail(
        neverOpened
          ? connectFailure(event, this.#url)
          : connectionLost('WebSocket connection failed.'),
      );
    });
  }

  /**
   * Sends one message, or queues it while the socket is still connecting. Once the transport
   * failed, the session is ending and every call on it rejects: nothing is queued any more.
   */
  send(message: string): void {
    if (this.#error !== undefined) return;
    if (this.#sendQueue !== undefined) {
      this.#sendQueue.push(message);
      return;
    }
    this.#socket.send(message);
    this.#closeIfPeerReadsTooSlowly();
  }

  /**
   * Ends the connection once more than the limit waits unsent: the peer's calls then fail as a
   * broken session, which its owner can reopen, instead of this process buffering without end.
   */
  #closeIfPeerReadsTooSlowly(): void {
    const buffered = this.#socket.bufferedAmount;
    if (typeof buffered !== 'number' || buffered <= this.#maxBufferedBytes) return;
    const { code, reason } = SEND_BUFFER_FULL_CLOSE;
    this.#fail(
      new SvcInternalError(`WebSocket ${reason}`, { status: 503, reason: 'send_buffer_full' }),
    );
    try {
      this.#socket.close(code, reason);
    } catch {
      // Already closing; the runtime ends the connection.
    }
  }

  /**
   * Ends the session once it holds more than `maxEntries` exports: entries the peer created here.
   * Every call the peer pushes (and every stream write it sends) stays an export until released
   * or answered, so a peer that pushes without releasing would otherwise grow the session's
   * tables without bound. Imports are not counted: they are this side's own calls and stream
   * writes, and a stream of small items legitimately keeps thousands of writes in flight, as
   * many as the flow-control window allows.
   */
  limitEntries(session: RpcSessionStats, maxEntries: number): void {
    this.#entryLimit = { exceeded: sessionExportLimit(session, maxEntries), maxEntries };
  }

  /**
   * The next message from the peer; rejects once the socket failed or closed, or when the
   * session holds more entries than its limit (the session then aborts and closes the socket).
   */
  receive(): Promise<string> {
    const interruption = this.#interruption;
    if (interruption !== undefined) {
      this.#interruption = undefined;
      return Promise.reject(interruption);
    }
    if (
      this.#entryLimit !== undefined && ++this.#receivedSinceCount >= SESSION_ENTRY_CHECK_INTERVAL
    ) {
      this.#receivedSinceCount = 0;
      const overLimit = this.#entryLimitError(this.#entryLimit);
      if (overLimit !== undefined) return Promise.reject(overLimit);
    }
    const next = this.#received.shift();
    if (next !== undefined) return this.#screened(next);
    if (this.#error !== undefined) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.#waiting = { resolve, reject };
    });
  }

  /** A queued message, refused if the screen refuses it (the session then aborts). */
  #screened(message: string): Promise<string> {
    const refusal = peerMessageRefusal(message, this.#receiver);
    return refusal === undefined ? Promise.resolve(message) : Promise.reject(refusal);
  }

  /** Whether the connection has ended: the peer closed, it broke, or the session aborted. */
  get failed(): boolean {
    return this.#error !== undefined;
  }

  /**
   * Whether `error` is this transport's own failure (the peer closed, the connection broke, a
   * non-text message, a peer reading too slowly) rather than something the session raised.
   */
  isOwnFailure(error: unknown): boolean {
    return this.#error !== undefined && error === this.#error;
  }

  /** Closes the socket with the RPC failure as the close reason. */
  abort(reason: unknown): void {
    if (this.#error === undefined || reason !== this.#error) this.#onSessionAborted?.(reason);
    try {
      this.#socket.close(RPC_ABORT_CLOSE_CODE, closeReason(reason));
    } catch {
      // Already closing; nothing left to tell the peer.
    }
    this.#fail(reason ?? new Error('RPC session aborted'));
  }

  /**
   * Aborts the session with `reason()` after `timeoutMs` unless the returned function is called
   * first; nothing happens once the transport has failed or closed meanwhile. The session ends
   * as for a refused message: the peer receives the abort, then the socket closes.
   */
  abortAfter(timeoutMs: number, reason: () => unknown): () => void {
    const timer = setTimeout(() => {
      this.#deadlines.delete(timer);
      if (this.#error === undefined) this.#interruptReceive(reason());
    }, timeoutMs);
    this.#deadlines.add(timer);
    return () => {
      clearTimeout(timer);
      this.#deadlines.delete(timer);
    };
  }

  /** Makes the session's pending (or next) read fail with `error`, which aborts the session. */
  #interruptReceive(error: unknown): void {
    const waiting = this.#waiting;
    if (waiting === undefined) {
      this.#interruption = error;
      return;
    }
    this.#waiting = undefined;
    waiting.reject(error);
  }

  #entryLimitError(limit: { exceeded: () => boolean; maxEntries: number }) {
    if (!limit.exceeded()) return undefined;
    return new SvcInternalError(
      `RPC session holds more than ${limit.maxEntries} calls and references from its peer; ` +
        'release results before pushing more',
      { status: 413, reason: 'rpc_session_too_large' },
    );
  }

  /**
   * A handshake that never completes (a peer that accepted the connection and went silent)
   * raises no event: without a limit, the session would wait on it forever and queue every
   * call. Failing the transport breaks the session, so its owner opens a fresh one.
   */
  #startOpenTimer(timeoutMs: number): void {
    this.#openTimer = setTimeout(() => {
      this.#openTimer = undefined;
      if (this.#sendQueue === undefined) return;
      this.#fail(connectionLost(`WebSocket did not open within ${timeoutMs} ms.`));
      try {
        this.#socket.close();
      } catch {
        // Already failing; the runtime ends the connection.
      }
    }, timeoutMs);
  }

  #clearOpenTimer(): void {
    if (this.#openTimer === undefined) return;
    clearTimeout(this.#openTimer);
    this.#openTimer = undefined;
  }

  #flushQueue(): void {
    this.#clearOpenTimer();
    const queued = this.#error === undefined ? this.#sendQueue ?? [] : [];
    this.#sendQueue = undefined;
    try {
      for (const message of queued) this.#socket.send(message);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#closeIfPeerReadsTooSlowly();
  }

  #onMessage(data: unknown): void {
    if (this.#error !== undefined) return;
    if (typeof data !== 'string') {
      this.#fail(new TypeError('Received a non-text WebSocket message on an RPC session.'));
      return;
    }
    const waiting = this.#waiting;
    if (waiting !== undefined) {
      this.#waiting = undefined;
      const refusal = peerMessageRefusal(data, this.#receiver);
      if (refusal === undefined) waiting.resolve(data);
      else waiting.reject(refusal);
    } else {
      this.#received.push(data);
    }
  }

  #fail(error: unknown): void {
    if (this.#error !== undefined) return;
    this.#error = error;
    this.#clearOpenTimer();
    for (const timer of this.#deadlines) clearTimeout(timer);
    this.#deadlines.clear();
    if (this.#sendQueue !== undefined) this.#sendQueue = [];
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(error);
  }
}
