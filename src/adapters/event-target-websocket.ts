/**
 * The surface of the standard `WebSocket` for a socket written in script on an `EventTarget`:
 * the ready-state constants (on the class and on each instance, where Cap'n Web and hand-written
 * code read them), the `on*` handler properties, the events a socket dispatches (a `CloseEvent`
 * even on Node 20, which has none), the checks `close(code, reason)` makes, and the `http(s)`
 * URL an upgrade request for a `ws(s)` URL goes to.
 *
 * A subclass brings the connection itself: its ready state, `send` and `close`. The in-memory
 * socket of `svcplane/testing` and the service-binding socket of `svcplane/workers` both build on
 * it, so each has one state machine and the surface they share is written once.
 *
 * @module
 */

/** Ready state: the handshake has not completed. */
export const WEBSOCKET_CONNECTING = 0;
/** Ready state: messages flow both ways. */
export const WEBSOCKET_OPEN = 1;
/** Ready state: the closing handshake has started. */
export const WEBSOCKET_CLOSING = 2;
/** Ready state: the connection has ended. */
export const WEBSOCKET_CLOSED = 3;

/** Close code of a connection that ended without a close frame (RFC 6455 §7.4.1). */
export const ABNORMAL_CLOSURE = 1006;
/** Close code reported when the closing end sent no code (RFC 6455 §7.4.1). */
export const NO_STATUS_RECEIVED = 1005;
/** A close frame's reason carries at most 123 UTF-8 bytes (RFC 6455 §5.5). */
export const MAX_CLOSE_REASON_BYTES = 123;

/** How a connection ended, as its `close` event reports it. */
export interface WebSocketCloseDetails {
  /** The close code: the one the closing end gave, 1005 for none, 1006 for a broken connection. */
  code: number;
  /** The close reason the closing end gave (empty for none or a broken connection). */
  reason: string;
  /** Whether the connection ended with a closing handshake (`false` for a broken one). */
  wasClean: boolean;
}

/**
 * Which side of a connection a socket is: a caller's socket takes the close codes the standard
 * client `WebSocket` takes; a service's (server) socket also takes the protocol's own codes.
 */
export type WebSocketEndRole = 'caller' | 'service';

/** A `MessageEvent` where the runtime has one; else an `Event` carrying `data`. */
export function webSocketMessageEvent(data: unknown): Event {
  if (typeof MessageEvent === 'function') return new MessageEvent('message', { data });
  return Object.defineProperty(new Event('message'), 'data', { value: data, enumerable: true });
}

/** A `CloseEvent` where the runtime has one (Node 20 has none); else an `Event` carrying it. */
export function webSocketCloseEvent(close: WebSocketCloseDetails): Event {
  const Constructor = (globalThis as { CloseEvent?: new (type: string, init: object) => Event })
    .CloseEvent;
  if (typeof Constructor === 'function') return new Constructor('close', close);
  const event = new Event('close');
  for (const [name, value] of Object.entries(close)) {
    Object.defineProperty(event, name, { value, enumerable: true });
  }
  return event;
}

/**
 * Whether a socket may close with `code`: a caller's takes what the standard `WebSocket` takes
 * (1000, 3000-4999); a service's, like the server sockets of every runtime, also takes the
 * protocol's own codes (RFC 6455 §7.4.1) other than those never sent in a frame.
 */
export function isSendableCloseCode(code: number, role: WebSocketEndRole): boolean {
  if (!Number.isInteger(code)) return false;
  if (code === 1000 || (code >= 3000 && code <= 4999)) return true;
  return role === 'service' && code >= 1001 && code <= 1014 &&
    code !== 1004 && code !== 1005 && code !== 1006;
}

/** Throws as the standard `close()` does for a code or reason it would not put in a frame. */
export function checkCloseArguments(
  code: number | undefined,
  reason: string | undefined,
  role: WebSocketEndRole,
): void {
  if (code !== undefined && !isSendableCloseCode(code, role)) {
    throw new DOMException(
      `The close code ${code} cannot be sent: use 1000 or 3000-4999` +
        (role === 'service' ? ' (or a protocol code other than 1004-1006)' : ''),
      'InvalidAccessError',
    );
  }
  if (reason !== undefined && new TextEncoder().encode(reason).length > MAX_CLOSE_REASON_BYTES) {
    throw new DOMException(
      `The close reason must be at most ${MAX_CLOSE_REASON_BYTES} bytes of UTF-8`,
      'SyntaxError',
    );
  }
}

/**
 * The `http(s)` URL an upgrade request for `url` is made to (`ws:` and `wss:` mapped, `http:`
 * and `https:` kept). Throws `SyntaxError`, as the `WebSocket` constructor does, for anything
 * that is not a URL of one of those schemes.
 */
export function upgradeRequestUrl(url: string, label: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SyntaxError(`${label}: ${JSON.stringify(String(url).slice(0, 200))} is not a URL`);
  }
  if (parsed.protocol === 'ws:') parsed.protocol = 'http:';
  else if (parsed.protocol === 'wss:') parsed.protocol = 'https:';
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new SyntaxError(`${label}: a WebSocket URL must be ws:, wss:, http: or https:`);
  }
  return parsed;
}

type EventHandler = ((event: Event) => void) | null;

/**
 * Whether this runtime's `EventTarget` itself calls a target's `on<type>` property when it
 * dispatches `<type>`, as workerd does. There a handler property must not also be a listener,
 * or each handler would run twice per event.
 */
const RUNTIME_CALLS_HANDLER_PROPERTIES = (() => {
  let called = false;
  class Probe extends EventTarget {
    get onprobe() {
      return () => called = true;
    }
  }
  new Probe().dispatchEvent(new Event('probe'));
  return called;
})();

/**
 * A socket shaped like the standard `WebSocket`, minus the connection: the constants, the `on*`
 * properties (each one listener, replaced when set again, called with the socket as `this`).
 */
export abstract class EventTargetWebSocket extends EventTarget {
  /** Ready state: the handshake has not completed. */
  static readonly CONNECTING = WEBSOCKET_CONNECTING;
  /** Ready state: messages flow both ways. */
  static readonly OPEN = WEBSOCKET_OPEN;
  /** Ready state: the closing handshake has started. */
  static readonly CLOSING = WEBSOCKET_CLOSING;
  /** Ready state: the connection has ended. */
  static readonly CLOSED = WEBSOCKET_CLOSED;
  /** Ready state: the handshake has not completed. */
  readonly CONNECTING = WEBSOCKET_CONNECTING;
  /** Ready state: messages flow both ways. */
  readonly OPEN = WEBSOCKET_OPEN;
  /** Ready state: the closing handshake has started. */
  readonly CLOSING = WEBSOCKET_CLOSING;
  /** Ready state: the connection has ended. */
  readonly CLOSED = WEBSOCKET_CLOSED;

  #handlers = new Map<string, { handler: EventHandler; listener: (event: Event) => void }>();

  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  abstract get readyState(): number;

  /** Handler of the `open` event, as on a standard socket. */
  get onopen(): EventHandler {
    return this.#handler('open');
  }
  set onopen(handler: EventHandler) {
    this.#setHandler('open', handler);
  }
  /** Handler of the `message` event, as on a standard socket. */
  get onmessage(): EventHandler {
    return this.#handler('message');
  }
  set onmessage(handler: EventHandler) {
    this.#setHandler('message', handler);
  }
  /** Handler of the `close` event, as on a standard socket. */
  get onclose(): EventHandler {
    return this.#handler('close');
  }
  set onclose(handler: EventHandler) {
    this.#setHandler('close', handler);
  }
  /** Handler of the `error` event, as on a standard socket. */
  get onerror(): EventHandler {
    return this.#handler('error');
  }
  set onerror(handler: EventHandler) {
    this.#setHandler('error', handler);
  }

  #handler(type: string): EventHandler {
    return this.#handlers.get(type)?.handler ?? null;
  }

  #setHandler(type: string, handler: EventHandler): void {
    const previous = this.#handlers.get(type);
    if (previous !== undefined && !RUNTIME_CALLS_HANDLER_PROPERTIES) {
      this.removeEventListener(type, previous.listener);
    }
    this.#handlers.delete(type);
    if (typeof handler !== 'function') return;
    const listener = (event: Event) => handler.call(this, event);
    this.#handlers.set(type, { handler, listener });
    if (!RUNTIME_CALLS_HANDLER_PROPERTIES) this.addEventListener(type, listener);
  }
}
