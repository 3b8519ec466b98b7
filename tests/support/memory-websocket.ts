/**
 * An in-memory WebSocket pair and upgrader, so WebSocket sessions (serveRpc's upgrade path and
 * the websocketRpc caller) can be tested in-process on every runtime, workerd included.
 */
import type { WebSocketUpgrader } from '../../src/service/websocket-upgrade.ts';
import { withWebSocketUpgrader } from '../../src/service/websocket-upgrade.ts';

type Listener = (event: Record<string, unknown>) => void;

/** One end of an in-memory socket pair, shaped like the standard `WebSocket`. */
export class MemoryWebSocket {
  readyState = 0;
  binaryType = 'blob';
  peer: MemoryWebSocket | undefined;
  closeCode: number | undefined;
  readonly sent: string[] = [];
  #listeners = new Map<string, Listener[]>();

  addEventListener(type: string, listener: Listener): void {
    const list = this.#listeners.get(type) ?? [];
    list.push(listener);
    this.#listeners.set(type, list);
  }

  dispatch(type: string, event: Record<string, unknown>): void {
    for (const listener of this.#listeners.get(type) ?? []) listener(event);
  }

  open(): void {
    if (this.readyState !== 0) return;
    this.readyState = 1;
    this.dispatch('open', {});
  }

  send(data: string): void {
    if (this.readyState !== 1) throw new Error('MemoryWebSocket is not open');
    this.sent.push(data);
    const peer = this.peer;
    // Delivered on a later task, as a real socket would.
    setTimeout(() => {
      if (peer !== undefined && peer.readyState === 1) peer.dispatch('message', { data });
    }, 0);
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    this.closeCode = code;
    this.dispatch('close', { code, reason });
    const peer = this.peer;
    if (peer !== undefined && peer.readyState < 2) {
      setTimeout(() => peer.close(code, reason), 0);
    }
  }
}

/** A connected pair `[client, server]`, both still connecting. */
export function memorySocketPair(): [MemoryWebSocket, MemoryWebSocket] {
  const client = new MemoryWebSocket();
  const server = new MemoryWebSocket();
  client.peer = server;
  server.peer = client;
  return [client, server];
}

/**
 * A `createWebSocket` factory that "connects" by calling `fetch` with an upgrade request for
 * the URL and an upgrader that accepts the server end of a fresh pair. Records every URL and
 * every upgrade response status.
 */
export function memoryWebSocketFactory(
  fetch: (request: Request, env?: unknown) => Promise<Response>,
): {
  createWebSocket: (url: string) => WebSocket;
  urls: string[];
  statuses: number[];
  sockets: MemoryWebSocket[];
} {
  const urls: string[] = [];
  const statuses: number[] = [];
  const sockets: MemoryWebSocket[] = [];
  const createWebSocket = (url: string): WebSocket => {
    urls.push(url);
    const [client, server] = memorySocketPair();
    sockets.push(client);
    const upgrader: WebSocketUpgrader = {
      upgrade(_request, _runtime, accept) {
        accept(server as unknown as WebSocket);
        return new Response(null, { status: 200 });
      },
    };
    const httpUrl = url.replace(/^ws/, 'http');
    const request = new Request(httpUrl, { headers: { Upgrade: 'websocket' } });
    fetch(request, withWebSocketUpgrader({}, upgrader)).then((response) => {
      statuses.push(response.status);
      if (response.status === 200) {
        server.open();
        client.open();
      } else {
        client.close(1002, `upgrade refused: ${response.status}`);
      }
    }, () => client.close(1011, 'upgrade failed'));
    return client as unknown as WebSocket;
  };
  return { createWebSocket, urls, statuses, sockets };
}
