/**
 * An in-memory WebSocket connection: two ends shaped like the standard `WebSocket`, joined so
 * that what one end sends, the other receives on a later task, as over a network.
 *
 * The ends follow the WebSocket standard where a test can tell the difference: each event is
 * its own task (promise reactions run between two messages), a message reaches an end only
 * while it is open, `close(code, reason)` runs the closing handshake so both ends report the
 * code and reason the closing end gave (1005 when it gave none), and a connection that breaks
 * without that handshake reports 1006 with `wasClean: false`. Sending before the connection
 * opened throws `InvalidStateError`; after `close()` a message is discarded without error.
 *
 * @module
 */
import {
  ABNORMAL_CLOSURE,
  checkCloseArguments,
  EventTargetWebSocket,
  NO_STATUS_RECEIVED,
  WEBSOCKET_CLOSED as CLOSED,
  WEBSOCKET_CLOSING as CLOSING,
  WEBSOCKET_CONNECTING as CONNECTING,
  WEBSOCKET_OPEN as OPEN,
  type WebSocketCloseDetails,
  webSocketCloseEvent,
  type WebSocketEndRole,
  webSocketMessageEvent,
} from '../adapters/event-target-websocket.ts';
import { nextMacrotask } from '../core/next-macrotask.ts';

/** How one end of a connection ended, as its `close` event reported it. */
export type MemoryWebSocketClose = WebSocketCloseDetails;

/** What one end still has to hand its listeners, in order, one task each. */
type Delivery =
  | { kind: 'open' }
  | { kind: 'message'; data: string | Uint8Array<ArrayBuffer> }
  | { kind: 'close-frame'; code: number; reason: string }
  | { kind: 'error' }
  | { kind: 'broken' };

/** Which side of the connection an end is: the caller's socket or the one a service accepted. */
export type MemoryWebSocketRole = WebSocketEndRole;

/** A copy of what `send` was given, so later changes to the caller's buffer do not travel. */
function copiedPayload(data: unknown): string | Uint8Array<ArrayBuffer> {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data.slice(0));
  if (ArrayBuffer.isView(data)) {
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
  }
  throw new TypeError('A memory WebSocket sends text, an ArrayBuffer or a typed array');
}

/**
 * One end of an in-memory connection. Create a connected pair with {@link memoryWebSocketPair};
 * the end is typed as the standard `WebSocket` where it is handed out.
 */
export class MemoryWebSocket extends EventTargetWebSocket {
  /** The URL this end stands for. */
  readonly url: string;
  /** No subprotocol is negotiated. */
  readonly protocol = '';
  /** No extension is negotiated. */
  readonly extensions = '';
  /** How binary messages are handed to listeners. */
  binaryType: 'blob' | 'arraybuffer' = 'blob';

  #readyState = CONNECTING;
  #peer: MemoryWebSocket | undefined;
  #closeSent = false;
  #broken = false;
  #deliveries: Delivery[] = [];
  #delivering = false;
  #onClosed: ((close: MemoryWebSocketClose) => void) | undefined;
  #role: MemoryWebSocketRole;

  /** One end for `url`, connecting; `onClosed` is told how it ended, after its `close` event. */
  constructor(
    url: string,
    role: MemoryWebSocketRole,
    onClosed?: (close: MemoryWebSocketClose) => void,
  ) {
    super();
    this.url = url;
    this.#role = role;
    this.#onClosed = onClosed;
  }

  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  get readyState(): number {
    return this.#readyState;
  }

  /** Always 0: a message leaves this end as soon as it is sent. */
  get bufferedAmount(): number {
    return 0;
  }

  /**
   * Sends text or binary data to the other end. Throws `InvalidStateError` while connecting;
   * once closing or closed, the data is discarded, as the standard says.
   */
  send(data: string | ArrayBuffer | ArrayBufferView): void {
    if (this.#readyState === CONNECTING) {
      throw new DOMException('The WebSocket is still connecting', 'InvalidStateError');
    }
    const payload = copiedPayload(data);
    if (this.#readyState !== OPEN || this.#broken) return;
    this.#toPeer({ kind: 'message', data: payload });
  }

  /**
   * Starts the closing handshake: the other end receives `code` and `reason` and answers, and
   * both ends then report them. While connecting, the connection fails instead (1006).
   */
  close(code?: number, reason?: string): void {
    checkCloseArguments(code, reason, this.#role);
    if (this.#readyState === CLOSING || this.#readyState === CLOSED || this.#broken) return;
    if (this.#readyState === CONNECTING) {
      this.fail();
      return;
    }
    this.#readyState = CLOSING;
    this.#sendCloseFrame(code ?? NO_STATUS_RECEIVED, code === undefined ? '' : reason ?? '');
  }

  /** Joins two ends; each then delivers what the other sends. */
  static join(first: MemoryWebSocket, second: MemoryWebSocket): void {
    first.#peer = second;
    second.#peer = first;
  }

  /**
   * Opens this end: at once for the end a service accepts (a server socket arrives open), or
   * on its own task with an `open` event for the end a caller holds.
   */
  open(withEvent: boolean): void {
    if (this.#readyState !== CONNECTING || this.#broken) return;
    if (withEvent) this.#enqueue({ kind: 'open' });
    else this.#readyState = OPEN;
  }

  /**
   * Ends this end without a closing handshake: whatever it had not yet delivered is lost, and
   * on its next task it reports 1006 (after an `error` event when it never opened). Nothing
   * reaches the other end.
   */
  fail(): void {
    if (this.#readyState === CLOSED || this.#broken) return;
    this.#broken = true;
    const wasConnecting = this.#readyState === CONNECTING;
    if (wasConnecting) this.#readyState = CLOSING;
    this.#deliveries = wasConnecting
      ? [{ kind: 'error' }, { kind: 'broken' }]
      : [{ kind: 'broken' }];
    this.#schedule();
  }

  #sendCloseFrame(code: number, reason: string): void {
    this.#closeSent = true;
    this.#toPeer({ kind: 'close-frame', code, reason });
  }

  #toPeer(delivery: Delivery): void {
    const peer = this.#peer;
    if (peer !== undefined) peer.#enqueue(delivery);
  }

  #enqueue(delivery: Delivery): void {
    if (this.#readyState === CLOSED || this.#broken) return;
    this.#deliveries.push(delivery);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#delivering) return;
    this.#delivering = true;
    void nextMacrotask().then(() => this.#deliverNext());
  }

  /** Hands one delivery to the listeners, then schedules the next on a later task. */
  #deliverNext(): void {
    this.#delivering = false;
    const delivery = this.#deliveries.shift();
    if (delivery !== undefined) this.#deliver(delivery);
    if (this.#deliveries.length > 0) this.#schedule();
  }

  #deliver(delivery: Delivery): void {
    switch (delivery.kind) {
      case 'open':
        if (this.#readyState !== CONNECTING) return;
        this.#readyState = OPEN;
        this.dispatchEvent(new Event('open'));
        return;
      case 'message':
        // The standard drops a message that arrives once the end is no longer open.
        if (this.#readyState !== OPEN) return;
        this.dispatchEvent(webSocketMessageEvent(this.#received(delivery.data)));
        return;
      case 'close-frame':
        if (this.#readyState === CLOSED) return;
        // The end that did not start the handshake answers with the same code and reason.
        if (!this.#closeSent) this.#sendCloseFrame(delivery.code, delivery.reason);
        this.#closed({ code: delivery.code, reason: delivery.reason, wasClean: true });
        return;
      case 'error':
        this.dispatchEvent(new Event('error'));
        return;
      case 'broken':
        this.#closed({ code: ABNORMAL_CLOSURE, reason: '', wasClean: false });
        return;
    }
  }

  #closed(close: MemoryWebSocketClose): void {
    this.#readyState = CLOSED;
    this.#deliveries = [];
    this.dispatchEvent(webSocketCloseEvent(close));
    this.#onClosed?.(close);
    this.#onClosed = undefined;
  }

  #received(data: string | Uint8Array<ArrayBuffer>): unknown {
    if (typeof data === 'string') return data;
    return this.binaryType === 'arraybuffer' ? data.buffer : new Blob([data]);
  }
}

/**
 * Two joined ends for `url`, both connecting: `[caller, service]`. `onCallerClosed` is told how
 * the caller's end ended, once its `close` event was dispatched.
 */
export function memoryWebSocketPair(
  url: string,
  onCallerClosed?: (close: MemoryWebSocketClose) => void,
): [caller: MemoryWebSocket, service: MemoryWebSocket] {
  const caller = new MemoryWebSocket(url, 'caller', onCallerClosed);
  const service = new MemoryWebSocket(url, 'service');
  MemoryWebSocket.join(caller, service);
  return [caller, service];
}
