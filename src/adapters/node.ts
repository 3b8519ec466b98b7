/**
 * Node: serve a `fetch` target over `node:http` (through `@hono/node-server`), with WebSocket
 * upgrades handled by `ws`, and a `ws`-backed WebSocket factory for callers on Node 20.
 *
 * Node delivers an upgrade as an `upgrade` event with the raw socket, outside the request
 * handler. The helper turns it into a `Request`, lets the target decide (its upgrader only
 * records the decision), and completes the handshake afterwards, so the target's response
 * headers (a request id, say) ride on the `101`, and a refusal is written back as a normal
 * HTTP response.
 *
 * @module
 */
import { createAdaptorServer } from '@hono/node-server';
import { type IncomingMessage, type Server, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import { wsWebSocketFactory } from './ws-client.ts';
import {
  checkFetchTarget,
  deferredWebSocketUpgrade,
  type FetchTarget,
  forEachForwardableHeader,
  MAX_WEBSOCKET_PAYLOAD_BYTES,
  resolveServeOptions,
  type ServedServer,
  servedServer,
  type ServeOptions,
} from './serve-target.ts';

export type { FetchTarget, ServedServer, ServeOptions } from './serve-target.ts';
export type { WsWebSocketFactoryOptions } from './ws-client.ts';

/** Largest refusal body written back on an upgrade connection. */
const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/**
 * A WebSocket factory for callers on Node (`websocketRpc(url, { createWebSocket })`), backed
 * by the `ws` client: Node 20 has no global `WebSocket`.
 */
export const nodeWebSocketFactory: typeof wsWebSocketFactory = wsWebSocketFactory;

/** The Request a Node upgrade event stands for (headers only; an upgrade has no body). */
function upgradeRequestFrom(incoming: IncomingMessage): Request {
  const target = incoming.url ?? '/';
  if (!target.startsWith('/')) throw new TypeError('upgrade request target must be a path');
  const url = new URL(target, `http://${incoming.headers.host ?? 'localhost'}`);
  const headers = new Headers();
  const raw = incoming.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i], raw[i + 1]);
  return new Request(url, { method: incoming.method ?? 'GET', headers });
}

/** Writes `response` on a socket that asked to upgrade, then ends it. */
async function writeRefusal(socket: Duplex, response: Response): Promise<void> {
  if (socket.destroyed) return;
  const body = new Uint8Array(await response.arrayBuffer()).subarray(0, MAX_REFUSAL_BODY_BYTES);
  const lines = [
    `HTTP/1.1 ${response.status} ${STATUS_CODES[response.status] ?? ''}`,
    'Connection: close',
    `Content-Length: ${body.byteLength}`,
  ];
  forEachForwardableHeader(response.headers, (value, name) => lines.push(`${name}: ${value}`));
  const head = new TextEncoder().encode(`${lines.join('\r\n')}\r\n\r\n`);
  const message = new Uint8Array(head.byteLength + body.byteLength);
  message.set(head);
  message.set(body, head.byteLength);
  socket.end(message);
}

/** Everything one server needs to answer upgrade events. */
interface UpgradeContext {
  target: FetchTarget;
  env: Record<string, unknown>;
  wss: WebSocketServer;
  handshakeHeaders: WeakMap<IncomingMessage, Headers>;
}

/**
 * Handles one upgrade event: asks the target, then either completes the handshake and hands
 * the socket to the accepted session, or writes the target's refusal.
 */
async function handleUpgrade(
  context: UpgradeContext,
  incoming: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  socket.on('error', () => socket.destroy());
  const upgrade = deferredWebSocketUpgrade();
  let response: Response;
  try {
    const request = upgradeRequestFrom(incoming);
    const env = withWebSocketUpgrader(
      { ...context.env, incoming, outgoing: undefined },
      upgrade.upgrader,
    );
    response = await context.target.fetch(request, env);
  } catch {
    await writeRefusal(socket, new Response('Bad upgrade request', { status: 400 }));
    return;
  }
  const accept = upgrade.acceptedBy(response);
  if (accept === undefined) {
    await writeRefusal(socket, response);
    return;
  }
  await response.body?.cancel();
  if (socket.destroyed) return;
  context.handshakeHeaders.set(incoming, response.headers);
  context.wss.handleUpgrade(incoming, socket, head, (ws) => {
    accept(ws as unknown as WebSocket);
  });
}

function listen(server: Server, port: number, hostname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : port);
    });
  });
}

/** What {@link attachWebSocketUpgrades} returns. */
export interface AttachedWebSocketUpgrades {
  /**
   * Terminates every WebSocket it accepted, ends every connection still upgrading, and stops
   * handling upgrades.
   */
  close(): void;
}

/**
 * Handles WebSocket upgrades on an existing Node `http.Server` for `target`: each upgrade
 * becomes a `Request` whose `env` carries `options.env`, Node's `incoming` and the Node
 * upgrader, so `serveRpc` accepts it; a refusal is written back as an HTTP response.
 */
export function attachWebSocketUpgrades(
  server: Server,
  target: FetchTarget,
  options: { env?: Record<string, unknown> } = {},
): AttachedWebSocketUpgrades {
  checkFetchTarget(target, 'attachWebSocketUpgrades');
  const { env } = resolveServeOptions(options, 'attachWebSocketUpgrades');
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_WEBSOCKET_PAYLOAD_BYTES });
  const handshakeHeaders = new WeakMap<IncomingMessage, Headers>();
  wss.on('headers', (lines: string[], incoming: IncomingMessage) => {
    const headers = handshakeHeaders.get(incoming);
    if (headers === undefined) return;
    forEachForwardableHeader(headers, (value, name) => lines.push(`${name}: ${value}`));
  });
  const context: UpgradeContext = { target, env, wss, handshakeHeaders };
  // A socket that asked to upgrade has left the HTTP server's connection tracking and is not a
  // `ws` client until its handshake completes (nor ever, once refused): tracking it until it
  // closes lets close() end one whose target never answers or whose peer never hangs up.
  const upgradeSockets = new Set<Duplex>();
  const onUpgrade = (incoming: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgradeSockets.add(socket);
    socket.once('close', () => upgradeSockets.delete(socket));
    handleUpgrade(context, incoming, socket, head).catch(() => socket.destroy());
  };
  server.on('upgrade', onUpgrade);
  return {
    close() {
      server.off('upgrade', onUpgrade);
      for (const socket of upgradeSockets) socket.destroy();
      upgradeSockets.clear();
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}

/**
 * Serves `target` on Node. Each request's `env` carries `options.env` and Node's `incoming` and
 * `outgoing`; upgrades also carry the Node WebSocket upgrader, so `serveRpc` finds it.
 */
export async function serveNode(
  target: FetchTarget,
  options: ServeOptions = {},
): Promise<ServedServer> {
  const { hostname, port: requestedPort, env: userEnv } = resolveServeOptions(options, 'serveNode');
  checkFetchTarget(target, 'serveNode');
  const server = createAdaptorServer({
    hostname,
    // Replacing the global Request/Response would change the application's behaviour.
    overrideGlobalObjects: false,
    fetch: (request, nodeEnv) => target.fetch(request, { ...userEnv, ...nodeEnv }),
  }) as Server;
  const upgrades = attachWebSocketUpgrades(server, target, { env: userEnv });
  const port = await listen(server, requestedPort, hostname);
  return servedServer(hostname, port, () =>
    new Promise<void>((resolve) => {
      upgrades.close();
      server.close(() => resolve());
      server.closeAllConnections();
    }));
}
