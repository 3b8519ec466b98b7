/**
 * A Cap'n Web transport over a `MessagePort`, for exercising customRpcTransport with a real
 * bidirectional channel (a `MessageChannel` pair) on every runtime.
 */
import type { RpcTransport } from 'capnweb';

/** String messages over one end of a `MessageChannel`; `null` announces a close. */
export class MessagePortRpcTransport implements RpcTransport {
  #port: MessagePort;
  #queue: string[] = [];
  #waiting: { resolve(message: string): void; reject(error: unknown): void } | undefined;
  #error: unknown;

  constructor(port: MessagePort) {
    this.#port = port;
    port.onmessage = (event: MessageEvent) => {
      if (this.#error !== undefined) return;
      if (event.data === null) {
        this.#port.close();
        this.#fail(new Error('Peer closed the MessagePort'));
        return;
      }
      const waiting = this.#waiting;
      this.#waiting = undefined;
      if (waiting !== undefined) waiting.resolve(String(event.data));
      else this.#queue.push(String(event.data));
    };
  }

  send(message: string): void {
    if (this.#error !== undefined) throw this.#error;
    this.#port.postMessage(message);
  }

  receive(): Promise<string> {
    const next = this.#queue.shift();
    if (next !== undefined) return Promise.resolve(next);
    if (this.#error !== undefined) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => (this.#waiting = { resolve, reject }));
  }

  abort(reason: unknown): void {
    try {
      this.#port.postMessage(null);
    } catch {
      // The peer is already gone.
    }
    this.#port.close();
    this.#fail(reason);
  }

  #fail(error: unknown): void {
    if (this.#error !== undefined) return;
    this.#error = error;
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.reject(error);
  }
}
