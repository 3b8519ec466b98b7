/**
 * The primitives the RPC benchmarks compare with: raw Cap'n Web on the runtime's own server,
 * with nothing of svcplane in between. One loopback server per benchmark serves both an HTTP
 * batch (`newHttpBatchRpcResponse`, or `nodeHttpBatchRpcResponse` on `node:http`) and a
 * WebSocket session (`newWebSocketRpcSession` over a `ws` server socket on Node, a
 * `Deno.upgradeWebSocket` socket on Deno; on Bun, `Bun.serve`'s socket through the few lines of
 * transport its handler-object API needs). Clients are raw too: `newHttpBatchRpcSession` over the
 * global `fetch`, and `newWebSocketRpcSession` over a `ws` client (Node, Deno: the same client
 * library the adapters hand our side) or Bun's global `WebSocket`.
 */
import {
  newHttpBatchRpcResponse,
  newHttpBatchRpcSession,
  newWebSocketRpcSession,
  nodeHttpBatchRpcResponse,
  RpcSession,
  type RpcStub,
  type RpcTarget,
  type RpcTransport,
} from 'capnweb';
import { WebSocket as WsWebSocket } from 'ws';

/** A raw server on 127.0.0.1: its `http://` origin, and how to stop it. */
export interface RawServer {
  url: string;
  close(): Promise<void>;
}

// Cap'n Web's WebSocket transport reads `WebSocket.CONNECTING` from the global, which Node 20
// lacks; the `ws` class carries the same constant. Only this bench process sees it, and our
// side never reads it.
const globals = globalThis as { WebSocket?: unknown };
globals.WebSocket ??= WsWebSocket;

/** A raw Cap'n Web WebSocket client session: `ws` on Node and Deno, the global on Bun. */
export function rawWebSocketMain<T extends RpcTarget>(origin: string): RpcStub<T> {
  const url = origin.replace(/^http/, 'ws');
  const runtime = globalThis as { Bun?: unknown };
  const socket = runtime.Bun !== undefined
    ? new WebSocket(url)
    : new WsWebSocket(url) as unknown as WebSocket;
  return newWebSocketRpcSession<T>(socket);
}

/** A raw Cap'n Web HTTP-batch client session (one batch) over the global `fetch`. */
export function rawHttpBatchMain<T extends RpcTarget>(origin: string): RpcStub<T> {
  return newHttpBatchRpcSession<T>(origin);
}

/** Starts the runtime's plain server with raw Cap'n Web behind it; `main()` per session. */
export function rawCapnWebServer(main: () => RpcTarget): Promise<RawServer> {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun !== undefined) return Promise.resolve(bunServer(main));
  if (runtime.Deno !== undefined) return Promise.resolve(denoServer(main));
  return nodeServer(main);
}

async function nodeServer(main: () => RpcTarget): Promise<RawServer> {
  const http = await import('node:http');
  const { WebSocketServer } = await import('ws');
  const server = http.createServer((request, response) => {
    nodeHttpBatchRpcResponse(request, response, main()).catch(() => response.destroy());
  });
  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (socket) => {
    newWebSocketRpcSession(socket as unknown as WebSocket, main());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets.clients) socket.terminate();
        sockets.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface DenoServeRuntime {
  serve(
    options: { hostname: string; port: number; onListen(): void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { addr: { port: number }; shutdown(): Promise<void> };
  upgradeWebSocket(request: Request): { socket: WebSocket; response: Response };
}

function denoServer(main: () => RpcTarget): RawServer {
  const deno = (globalThis as unknown as { Deno: DenoServeRuntime }).Deno;
  const server = deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, (request) => {
    if (request.headers.get('upgrade')?.toLowerCase() === 'websocket') {
      const { socket, response } = deno.upgradeWebSocket(request);
      newWebSocketRpcSession(socket, main());
      return response;
    }
    return newHttpBatchRpcResponse(request, main());
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

interface BunSocket {
  data: { transport?: BunSocketTransport };
  send(message: string): number;
  close(code?: number, reason?: string): void;
}

interface BunServeRuntime {
  serve(options: {
    hostname: string;
    port: number;
    fetch(request: Request, server: { upgrade(request: Request, init: object): boolean }):
      | Response
      | Promise<Response>
      | undefined;
    websocket: {
      open(socket: BunSocket): void;
      message(socket: BunSocket, message: string | Uint8Array): void;
      close(socket: BunSocket, code: number, reason: string): void;
    };
  }): { port: number; stop(closeActive?: boolean): Promise<void> | void };
}

/** Cap'n Web's transport contract over Bun's handler-object socket: a queue and a waiter. */
class BunSocketTransport implements RpcTransport {
  #queue: string[] = [];
  #waiter: { resolve(message: string): void; reject(error: unknown): void } | undefined;
  #error: unknown;

  constructor(readonly socket: BunSocket) {}

  send(message: string): void {
    this.socket.send(message);
  }

  receive(): Promise<string> {
    const next = this.#queue.shift();
    if (next !== undefined) return Promise.resolve(next);
    if (this.#error !== undefined) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  abort(): void {
    this.socket.close(3000, 'aborted');
  }

  deliver(message: string): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (waiter !== undefined) waiter.resolve(message);
    else this.#queue.push(message);
  }

  closed(code: number, reason: string): void {
    this.#error ??= new Error(`Peer closed WebSocket: ${code} ${reason}`);
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(this.#error);
  }
}

function bunServer(main: () => RpcTarget): RawServer {
  const bun = (globalThis as unknown as { Bun: BunServeRuntime }).Bun;
  const server = bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(request, server) {
      if (request.headers.get('upgrade')?.toLowerCase() === 'websocket') {
        if (server.upgrade(request, { data: {} })) return undefined;
        return new Response('upgrade failed', { status: 400 });
      }
      return newHttpBatchRpcResponse(request, main());
    },
    websocket: {
      open(socket) {
        socket.data.transport = new BunSocketTransport(socket);
        new RpcSession(socket.data.transport, main());
      },
      message(socket, message) {
        socket.data.transport?.deliver(
          typeof message === 'string' ? message : new TextDecoder().decode(message),
        );
      },
      close(socket, code, reason) {
        socket.data.transport?.closed(code, reason);
      },
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    close: async () => {
      await server.stop(true);
    },
  };
}
