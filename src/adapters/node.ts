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
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { Buffer } from 'node:buffer';
import {
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket as WsWebSocket, WebSocketServer } from 'ws';
import { markServerFramedBody, readBoundedBytes } from '../core/bounded-body.ts';
import { withWebSocketUpgrader } from '../service/websocket-upgrade.ts';
import { untouchedWholeText } from '../core/whole-text-body.ts';
import { markTakesDeferredResponses } from '../core/deferred-response.ts';
import { SERVER_CLOSING, settledWithin } from './websocket-close-grace.ts';
import { wsWebSocketFactory } from './ws-client.ts';
import { coalesceFramesPerTurn } from './ws-frame-coalescing.ts';
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
export { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';
export { swaggerUiAssets } from './swagger-ui-assets.ts';
export { WEBSOCKET_CLOSE_GRACE_MS } from './websocket-close-grace.ts';
export type { WsWebSocketFactoryOptions } from './ws-client.ts';

/** Largest refusal body written back on an upgrade connection. */
const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/**
 * A WebSocket factory for callers on Node (`websocketRpc(url, { createWebSocket })`), backed
 * by the `ws` client: Node 20 has no global `WebSocket`.
 */
export const nodeWebSocketFactory: typeof wsWebSocketFactory = wsWebSocketFactory;

/**
 * Host values used as sent, with no check that parsing keeps them: lower-case names and
 * addresses, with a port of four or five digits. Any other Host goes through the URL parser
 * and must come out naming the same host. This is the split the HTTP path draws.
 */
const PLAIN_HOST = /^[0-9a-z._-]+(?::(?:[1-9][0-9]{3}|[1-5][0-9]{4}))?$/;

/**
 * Refuses a backslash before the query: the URL parser reads it as `/`, so `/\evil.test/p`
 * would become `//evil.test/p`.
 */
function refuseBackslashInPath(target: string): void {
  if (target.split('?', 1)[0].includes('\\')) {
    throw new TypeError('backslash in the request path');
  }
}

/**
 * Whether parsing kept the host a Host header named (case and port aside): `a@b` or `a/b`
 * would otherwise put another host, or a piece of the path, in the authority. Same test as
 * the HTTP path, so both refuse the same headers.
 */
function parsedKeepsHost(url: URL, host: string): boolean {
  return url.hostname.length === host.length ||
    url.hostname === host.replace(/:\d+$/, '').toLowerCase();
}

/**
 * The URL of an origin-form target (`/path?query`) received with `Host: host`. The target is
 * appended to `scheme://host` as text, never resolved against it: resolved, `//evil.test/p`
 * would name the host evil.test instead of being a path.
 */
function originFormUrl(scheme: string, host: string, target: string): string {
  const plain = PLAIN_HOST.test(host);
  if (plain && target === '') return `${scheme}://${host}/`;
  if (plain && !target.startsWith('/')) throw new TypeError('request target must be a path');
  refuseBackslashInPath(target);
  const url = new URL(`${scheme}://${host}${target}`);
  if (!plain && !parsedKeepsHost(url, host)) throw new TypeError('invalid Host header');
  return url.href;
}

/**
 * Refuses an HTTP/1.1 upgrade without a Host header (RFC 9112 §3.2), whatever its target's
 * form: Node refuses it so on the HTTP path, but not on an upgrade.
 */
function refuseMissingHost(incoming: IncomingMessage): void {
  const http11 = incoming.httpVersionMajor === 1 && incoming.httpVersionMinor === 1;
  if (http11 && incoming.headers.host === undefined) {
    throw new TypeError('missing Host header');
  }
}

/**
 * The URL of an upgrade request, built as `@hono/node-server` builds it for the same bytes on
 * the HTTP path, so an upgrade and a plain request agree on the URL (the same-origin checks and
 * routes of service middleware see one value) and on what is refused: a `TypeError`, answered
 * 400. An absolute-form target (`http://host/path`, RFC 9112 §3.2.2) is the URL itself; an
 * empty Host (or none, in HTTP/1.0) stands for `defaultHost`, the server's hostname. Only a
 * Host no `Request` can carry differs: refused here (`1.2.3.4.5`) or normalised (`127.1`),
 * where the HTTP path passes its text through.
 */
function upgradeUrlOf(incoming: IncomingMessage, defaultHost: string | undefined): string {
  refuseMissingHost(incoming);
  const target = incoming.url ?? '';
  if (target.startsWith('http://') || target.startsWith('https://')) {
    refuseBackslashInPath(target);
    return new URL(target).href;
  }
  const host = incoming.headers.host || defaultHost;
  if (!host) throw new TypeError('missing Host header');
  const encrypted = (incoming.socket as { encrypted?: boolean } | undefined)?.encrypted;
  return originFormUrl(encrypted ? 'https' : 'http', host, target);
}

/** The Request a Node upgrade event stands for (headers only; an upgrade has no body). */
function upgradeRequestFrom(incoming: IncomingMessage, defaultHost: string | undefined): Request {
  const url = upgradeUrlOf(incoming, defaultHost);
  const headers = new Headers();
  const raw = incoming.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i], raw[i + 1]);
  return new Request(url, { method: incoming.method ?? 'GET', headers });
}

const NO_BODY = new Uint8Array(0);

/**
 * The body written with a refusal: the target's, when it fits in `MAX_REFUSAL_BODY_BYTES`, else
 * none (a cut document would read as a whole one). A refused upgrade on a route that streams
 * (events, a download) thus costs at most the limit, and the read stops when the socket
 * closes, whether the peer left or `close()` ended it.
 */
async function refusalBodyOf(socket: Duplex, response: Response): Promise<Uint8Array> {
  const body = response.body;
  if (body === null) return NO_BODY;
  if (socket.destroyed) {
    await body.cancel().catch(() => {});
    return NO_BODY;
  }
  // The bounded reader locks what it reads until it returns; reading through a relay leaves
  // the body's cancellation to the pipe, which the peer's leaving aborts.
  const gone = new AbortController();
  const onGone = () => gone.abort();
  socket.once('close', onGone);
  // An upgrade socket is handed over paused, and the HTTP server allows half-open sockets: only
  // reading (and dropping) what the peer sends shows its hang-up, as an `end`.
  socket.once('end', onGone);
  socket.resume();
  const relay = new TransformStream<Uint8Array, Uint8Array>();
  body.pipeTo(relay.writable, { signal: gone.signal }).catch(() => {});
  try {
    const bytes = await readBoundedBytes(
      { headers: response.headers, body: relay.readable },
      MAX_REFUSAL_BODY_BYTES,
    );
    return bytes ?? NO_BODY;
  } catch {
    return NO_BODY;
  } finally {
    socket.off('close', onGone);
    socket.off('end', onGone);
  }
}

/** Writes `response` on a socket that asked to upgrade, then ends it. */
async function writeRefusal(socket: Duplex, response: Response): Promise<void> {
  const body = await refusalBodyOf(socket, response);
  if (socket.destroyed) return;
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
  /** The host an upgrade with an empty (or, in HTTP/1.0, no) `Host` is for; none: refused. */
  defaultHost: string | undefined;
  /**
   * Sockets that asked to upgrade and are not (or never become) a `ws` client: close() ends
   * them at once, where a `ws` client is closed with its close frame.
   */
  handshaking: Set<Duplex>;
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
    const request = upgradeRequestFrom(incoming, context.defaultHost);
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
    context.handshaking.delete(socket);
    coalesceFramesPerTurn(ws, socket);
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
   * Stops handling upgrades, ends every connection still upgrading, and closes every WebSocket
   * it accepted with `1001` after what was queued to it; resolves once they all closed, or
   * after `WEBSOCKET_CLOSE_GRACE_MS` (1 s), when those left are terminated.
   */
  close(): Promise<void>;
}

/**
 * The `ws` server that completes accepted handshakes. It never agrees to a subprotocol: the
 * RPC route speaks none, and a server that does not agree must send none back (RFC 6455
 * §4.2.2), where `ws` would otherwise pick the client's first offer.
 */
function handshakeServer(handshakeHeaders: WeakMap<IncomingMessage, Headers>): WebSocketServer {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WEBSOCKET_PAYLOAD_BYTES,
    handleProtocols: () => false,
  });
  wss.on('headers', (lines: string[], incoming: IncomingMessage) => {
    const headers = handshakeHeaders.get(incoming);
    if (headers === undefined) return;
    forEachForwardableHeader(headers, (value, name) => lines.push(`${name}: ${value}`));
  });
  return wss;
}

/** Resolves once `client` has closed. */
function closedOf(client: WsWebSocket): Promise<void> {
  if (client.readyState === WsWebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => client.once('close', () => resolve()));
}

/**
 * Closes every client of `wss` with `1001`: `ws` writes the close frame after every message
 * already queued and ends the connection once the peer answers. Clients still open after
 * {@link WEBSOCKET_CLOSE_GRACE_MS} (a peer that stopped reading or never answers) are
 * terminated.
 */
async function closeClients(wss: WebSocketServer): Promise<void> {
  const clients = [...wss.clients];
  const closed = clients.map(closedOf);
  for (const client of clients) client.close(SERVER_CLOSING.code, SERVER_CLOSING.reason);
  await settledWithin(closed);
  for (const client of clients) {
    if (client.readyState !== WsWebSocket.CLOSED) client.terminate();
  }
}

/** {@link attachWebSocketUpgrades} once its arguments are checked. */
function attachUpgrades(
  server: Server,
  target: FetchTarget,
  env: Record<string, unknown>,
  defaultHost: string | undefined,
): AttachedWebSocketUpgrades {
  const handshakeHeaders = new WeakMap<IncomingMessage, Headers>();
  const wss = handshakeServer(handshakeHeaders);
  // A socket that asked to upgrade has left the HTTP server's connection tracking and is not a
  // `ws` client until its handshake completes (nor ever, once refused): tracking it until then
  // lets close() end one whose target never answers or whose peer never hangs up.
  const handshaking = new Set<Duplex>();
  const context: UpgradeContext = { target, env, wss, handshakeHeaders, defaultHost, handshaking };
  const onUpgrade = (incoming: IncomingMessage, socket: Duplex, head: Buffer) => {
    handshaking.add(socket);
    socket.once('close', () => handshaking.delete(socket));
    handleUpgrade(context, incoming, socket, head).catch(() => socket.destroy());
  };
  server.on('upgrade', onUpgrade);
  return {
    async close() {
      server.off('upgrade', onUpgrade);
      for (const socket of handshaking) socket.destroy();
      handshaking.clear();
      wss.close();
      await closeClients(wss);
    },
  };
}

/**
 * Handles WebSocket upgrades on an existing Node `http.Server` (or `https.Server`) for
 * `target`: each upgrade becomes a `Request` whose `env` carries `options.env`, Node's
 * `incoming` and the Node upgrader, so `serveRpc` accepts it; a refusal is written back as an
 * HTTP response. An upgrade without a `Host` header is refused with a 400.
 */
export function attachWebSocketUpgrades(
  server: Server,
  target: FetchTarget,
  options: { env?: Record<string, unknown> } = {},
): AttachedWebSocketUpgrades {
  checkFetchTarget(target, 'attachWebSocketUpgrades');
  const { env } = resolveServeOptions(options, 'attachWebSocketUpgrades', ['env']);
  return attachUpgrades(server, target, env, undefined);
}

/**
 * Node's HTTP parser never delivers more body than a request's `Content-Length`: its body may
 * be read whole (`@hono/node-server` then reads the socket directly instead of building a web
 * stream for it). A read that gives up ends the connection once its answer (a 408) is written,
 * so a sender that stalls holds nothing afterwards.
 */
function markFramed(
  request: Request,
  nodeEnv: { incoming?: IncomingMessage; outgoing?: ServerResponse },
): void {
  const { incoming, outgoing } = nodeEnv;
  if (incoming === undefined || outgoing === undefined) return;
  if (request.method === 'GET' || request.method === 'HEAD') return;
  markServerFramedBody(request, () => {
    if (outgoing.writableFinished) incoming.destroy();
    else outgoing.once('close', () => incoming.destroy());
  });
}

/** Node's header record for `headers`, every `Set-Cookie` kept apart. */
function outgoingHeadersOf(headers: Headers): OutgoingHttpHeaders {
  const record: OutgoingHttpHeaders = {};
  headers.forEach((value, name) => {
    if (name !== 'set-cookie') record[name] = value;
  });
  const cookies = headers.getSetCookie();
  if (cookies.length > 0) record['set-cookie'] = cookies;
  return record;
}

/**
 * Writes an answer built whole from a string (an HTTP batch's) straight to `outgoing`, with its
 * status and headers, rather than letting `@hono/node-server` read it back through its body
 * stream: a global `Response` is not its own lightweight one, so it would drain the stream chunk
 * by chunk. Any other answer, or one whose body someone touched, goes back as it is.
 */
async function writtenWhole(
  answer: Response | Promise<Response>,
  outgoing: ServerResponse,
): Promise<Response> {
  const response = await answer;
  const text = untouchedWholeText(response);
  if (text === undefined || response.headers.has('transfer-encoding')) return response;
  // A handler that wrote to Node's response itself answered already; the adapter's own path
  // deals with what it returned.
  if (outgoing.headersSent) return response;
  const headers = outgoingHeadersOf(response.headers);
  headers['content-length'] = Buffer.byteLength(text);
  outgoing.writeHead(response.status, headers);
  outgoing.end(text);
  return RESPONSE_ALREADY_SENT;
}

/**
 * Serves `target` on Node. Each request's `env` carries `options.env` and Node's `incoming` and
 * `outgoing`; upgrades also carry the Node WebSocket upgrader, so `serveRpc` finds it. A
 * WebSocket message above `MAX_WEBSOCKET_PAYLOAD_BYTES` (32 MiB) closes its connection with
 * `1009` before it is read whole.
 *
 * `close()` stops listening, closes every HTTP connection, and closes every WebSocket with `1001`
 * after the messages already queued to it; it resolves once they all closed, or once
 * `WEBSOCKET_CLOSE_GRACE_MS` (1 s) passed and those left were terminated.
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
    fetch: (request, nodeEnv) => {
      const { outgoing } = nodeEnv as { incoming?: IncomingMessage; outgoing?: ServerResponse };
      markFramed(request, nodeEnv as { incoming?: IncomingMessage; outgoing?: ServerResponse });
      // What the target answers comes back through `writtenWhole` and `@hono/node-server`, which
      // read it through the `Response` interface alone.
      const env = markTakesDeferredResponses({ ...userEnv, ...nodeEnv });
      const answer = target.fetch(request, env);
      return outgoing === undefined ? answer : writtenWhole(answer, outgoing);
    },
  }) as Server;
  // The hostname is the HTTP path's default host too, so both build the same URLs.
  const upgrades = attachUpgrades(server, target, userEnv, hostname);
  const port = await listen(server, requestedPort, hostname);
  return servedServer(hostname, port, async () => {
    // First, so no upgrade is handled once the server is closing.
    const websocketsClosed = upgrades.close();
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await websocketsClosed;
    await stopped;
  });
}
