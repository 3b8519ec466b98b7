/**
 * Client WebSockets over a Cloudflare service binding. Between two Workers joined by a binding
 * there is no URL a `new WebSocket(url)` could dial: the binding's way is
 * `binding.fetch(request with Upgrade: websocket)`, whose `101` answer carries
 * `response.webSocket`, which the caller accepts. That is asynchronous, while a socket factory
 * (`websocketRpc`'s and `cloudflareServiceBinding`'s `createWebSocket`) must return a socket at
 * once; the socket returned here stands in for the one the binding will hand over, connecting
 * until it arrives, exactly as a standard client socket connects.
 *
 * @module
 */
import { SvcConfigurationError } from '../core/errors.ts';
import { nextMacrotask } from '../core/next-macrotask.ts';
import type { ServiceBindingFetcher } from '../caller/transports/http-batch.ts';
import {
  ABNORMAL_CLOSURE,
  checkCloseArguments,
  EventTargetWebSocket,
  isSendableCloseCode,
  NO_STATUS_RECEIVED,
  upgradeRequestUrl,
  WEBSOCKET_CLOSED as CLOSED,
  WEBSOCKET_CLOSING as CLOSING,
  WEBSOCKET_CONNECTING as CONNECTING,
  WEBSOCKET_OPEN as OPEN,
  webSocketCloseEvent,
  webSocketMessageEvent,
} from './event-target-websocket.ts';

/** The socket a Workers `101` answer carries: it is accepted before use, and open once accepted. */
interface AcceptableWebSocket {
  accept(): void;
  readonly readyState: number;
  binaryType?: string;
  readonly protocol?: string | null;
  readonly extensions?: string | null;
  readonly bufferedAmount?: number;
  send(data: string | ArrayBuffer | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  // deno-lint-ignore no-explicit-any
  addEventListener(type: string, listener: (event: any) => void): void;
}

/** What a socket's `close` event carries; every field may be missing on a hand-made socket. */
interface ReceivedClose {
  code?: number;
  reason?: string;
  wasClean?: boolean;
}

const SWITCHING_PROTOCOLS = 101;

/** The socket a `101` answer carries, when there is one a caller can accept. */
function acceptableSocket(response: Response): AcceptableWebSocket | undefined {
  if (response === null || typeof response !== 'object') return undefined;
  if (response.status !== SWITCHING_PROTOCOLS) return undefined;
  const socket = (response as { webSocket?: unknown }).webSocket;
  if (socket === null || typeof socket !== 'object') return undefined;
  const candidate = socket as Partial<AcceptableWebSocket>;
  const methods = [candidate.accept, candidate.send, candidate.close, candidate.addEventListener];
  return methods.every((method) => typeof method === 'function')
    ? socket as AcceptableWebSocket
    : undefined;
}

/** Lets go of a refusal's body, which nobody reads: the runtime may then free the subrequest. */
function discardBody(response: unknown): void {
  const body = (response as { body?: { cancel?: () => Promise<void> } } | null)?.body;
  if (typeof body?.cancel !== 'function') return;
  try {
    body.cancel().catch(() => {});
  } catch {
    // A body already locked or consumed is no longer ours to release.
  }
}

/**
 * Closes a socket that arrived after its caller gave up: accepted first, since a Workers socket
 * cannot be closed before, so the service's end sees a normal closure instead of waiting.
 */
function closeAbandoned(socket: AcceptableWebSocket): void {
  try {
    socket.accept();
    socket.close(1000, 'closed while connecting');
  } catch {
    // Already closed by the service; nothing is left open.
  }
}

/**
 * A client socket whose connection is an upgrade through a service binding. Connecting until
 * the binding answers; then either open (the `101`'s socket accepted, every call and event
 * forwarded) or failed as a refused handshake fails: `error`, then `close` with 1006.
 */
class ServiceBindingWebSocket extends EventTargetWebSocket {
  /** The URL this socket was opened for (`ws:` or `wss:` as given). */
  readonly url: string;
  /** How binary messages are handed to listeners, as on a standard socket. */
  binaryType: 'blob' | 'arraybuffer' = 'blob';

  #readyState = CONNECTING;
  #socket: AcceptableWebSocket | undefined;
  #cancel = new AbortController();

  constructor(url: string, binding: ServiceBindingFetcher) {
    super();
    const target = upgradeRequestUrl(url, 'serviceBindingWebSocketFactory');
    this.url = url;
    const request = new Request(target, {
      method: 'GET',
      headers: { Upgrade: 'websocket' },
      signal: this.#cancel.signal,
    });
    void this.#connect(binding, request);
  }

  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  get readyState(): number {
    return this.#readyState;
  }

  /** Bytes the accepted socket still holds unsent, where it reports them; else 0. */
  get bufferedAmount(): number {
    const buffered = this.#socket?.bufferedAmount;
    return typeof buffered === 'number' ? buffered : 0;
  }

  /** The subprotocol the service chose (empty until open, or when none was). */
  get protocol(): string {
    const protocol = this.#socket?.protocol;
    return typeof protocol === 'string' ? protocol : '';
  }

  /** The extensions the service chose (empty until open, or when none were). */
  get extensions(): string {
    const extensions = this.#socket?.extensions;
    return typeof extensions === 'string' ? extensions : '';
  }

  /**
   * Sends text or binary data through the accepted socket. Throws `InvalidStateError` while
   * connecting; once closing or closed the data is discarded, as the standard says.
   */
  send(data: string | ArrayBuffer | ArrayBufferView): void {
    if (this.#readyState === CONNECTING) {
      throw new DOMException('The WebSocket is still connecting', 'InvalidStateError');
    }
    if (this.#readyState !== OPEN || this.#socket === undefined) return;
    this.#socket.send(data);
  }

  /**
   * Starts the closing handshake with `code` and `reason` (1000 or 3000-4999, as a standard
   * client socket takes). While connecting, the upgrade is abandoned and the socket fails
   * (1006); a socket the binding still hands over is then closed at once.
   */
  close(code?: number, reason?: string): void {
    checkCloseArguments(code, reason, 'caller');
    if (this.#readyState === CLOSING || this.#readyState === CLOSED) return;
    if (this.#readyState === CONNECTING) {
      this.#cancel.abort();
      this.#failConnecting();
      return;
    }
    this.#readyState = CLOSING;
    try {
      // The standard sends a reason without a code under 1000.
      if (code === undefined && reason === undefined) this.#socket?.close();
      else this.#socket?.close(code ?? 1000, reason ?? '');
    } catch {
      // The service closed first; its close event ends this socket.
    }
  }

  async #connect(binding: ServiceBindingFetcher, request: Request): Promise<void> {
    let response: Response;
    try {
      response = await binding.fetch(request);
    } catch {
      this.#failConnecting();
      return;
    }
    const socket = acceptableSocket(response);
    if (socket === undefined) {
      discardBody(response);
      this.#failConnecting(response.status);
      return;
    }
    if (this.#readyState !== CONNECTING) {
      closeAbandoned(socket);
      return;
    }
    try {
      socket.accept();
    } catch {
      this.#failConnecting();
      return;
    }
    this.#opened(socket);
  }

  /** Listens to the accepted socket, then opens: `open` precedes anything it delivers. */
  #opened(socket: AcceptableWebSocket): void {
    this.#socket = socket;
    try {
      // Binary data arrives as bytes, handed on as this socket's `binaryType` asks.
      socket.binaryType = 'arraybuffer';
    } catch {
      // A socket with a fixed binary type: its data is handed on as it comes.
    }
    socket.addEventListener('message', (event: { data: unknown }) => this.#received(event.data));
    socket.addEventListener('close', (event: ReceivedClose) => this.#closedBy(socket, event));
    socket.addEventListener('error', () => {
      if (this.#readyState !== CLOSED) this.dispatchEvent(new Event('error'));
    });
    this.#readyState = OPEN;
    this.dispatchEvent(new Event('open'));
  }

  #received(data: unknown): void {
    // The standard drops a message that arrives once the socket is no longer open.
    if (this.#readyState !== OPEN) return;
    this.dispatchEvent(webSocketMessageEvent(this.#asBinaryType(data)));
  }

  #asBinaryType(data: unknown): unknown {
    if (typeof data === 'string' || this.binaryType !== 'blob') return data;
    if (data instanceof ArrayBuffer) return new Blob([data]);
    if (ArrayBuffer.isView(data)) {
      return new Blob([new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice()]);
    }
    return data;
  }

  /**
   * The connection ended. A Worker whose compatibility date predates 2026-04-07 does not answer
   * a peer's close frame by itself, so it is answered here, as a standard socket answers it.
   */
  #closedBy(socket: AcceptableWebSocket, event: ReceivedClose): void {
    if (this.#readyState === CLOSED) return;
    const code = typeof event.code === 'number' ? event.code : NO_STATUS_RECEIVED;
    const reason = typeof event.reason === 'string' ? event.reason : '';
    if (socket.readyState !== CLOSED) {
      try {
        if (isSendableCloseCode(code, 'service')) socket.close(code, reason);
        else socket.close();
      } catch {
        // Already closed after all.
      }
    }
    this.#readyState = CLOSED;
    const wasClean = typeof event.wasClean === 'boolean'
      ? event.wasClean
      : code !== ABNORMAL_CLOSURE;
    this.dispatchEvent(webSocketCloseEvent({ code, reason, wasClean }));
  }

  /**
   * Fails a connection that never opened, as a refused handshake does: closing now, then on
   * a later task closed, with an `error` event and a `close` event reporting 1006. The `error`
   * event carries the `status` of an upgrade the service answered without switching protocols,
   * so the session can tell a wrong path from a lost connection.
   */
  #failConnecting(status?: number): void {
    if (this.#readyState !== CONNECTING) return;
    this.#readyState = CLOSING;
    void nextMacrotask().then(() => {
      this.#readyState = CLOSED;
      const error = new Event('error');
      if (status !== undefined) Object.defineProperty(error, 'status', { value: status });
      this.dispatchEvent(error);
      this.dispatchEvent(
        webSocketCloseEvent({ code: ABNORMAL_CLOSURE, reason: '', wasClean: false }),
      );
    });
  }
}

/** Refuses anything that is not a binding: an object (or function) with a `fetch` method. */
function checkBinding(binding: unknown): ServiceBindingFetcher {
  const holder = binding as { fetch?: unknown } | null | undefined;
  if (
    (typeof binding !== 'object' && typeof binding !== 'function') || binding === null ||
    typeof holder?.fetch !== 'function'
  ) {
    throw new SvcConfigurationError(
      'serviceBindingWebSocketFactory needs a service binding with a fetch method (env.ORDERS, ' +
        'say)',
    );
  }
  return binding as ServiceBindingFetcher;
}

/**
 * A socket factory for `createWebSocket` (of `websocketRpc` or `cloudflareServiceBinding`)
 * whose sockets connect through a Cloudflare service binding: each one is an upgrade request
 * to `binding.fetch` (`ws:`/`wss:` sent as `http:`/`https:`), returned connecting as the
 * standard `WebSocket` constructor returns one. A `101` carrying `response.webSocket` opens it;
 * any other answer, or a `fetch` that throws, fails it as a refused handshake fails (`error`,
 * then `close` with 1006); the `error` event of an answer carries its `status`, so the session
 * fails as refused with that status (not worth retrying for a 404) rather than as lost.
 *
 * Throws `SvcConfigurationError` now when `binding` has no `fetch` method; the returned factory
 * throws `SyntaxError`, as the `WebSocket` constructor does, for a URL it cannot open.
 */
export function serviceBindingWebSocketFactory(
  binding: ServiceBindingFetcher,
): (url: string) => WebSocket {
  const checked = checkBinding(binding);
  return (url: string) => new ServiceBindingWebSocket(url, checked) as unknown as WebSocket;
}
