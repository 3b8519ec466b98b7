/**
 * WebSocket upgrade behind one runtime-neutral interface. Each runtime upgrades differently
 * (`WebSocketPair` on Workers, `Deno.upgradeWebSocket`, Bun's `server.upgrade`, `ws` on Node);
 * the adapters under `src/adapters/` implement {@link WebSocketUpgrader} and their serving
 * helpers hand it to the service through the `env` argument of `fetch`, under
 * {@link SVC_WEBSOCKET_UPGRADER}.
 *
 * Only Workers can be recognised from here, by the `WebSocketPair` global: a feature check, not
 * a runtime import.
 *
 * @module
 */

/** Upgrades one request to a WebSocket and hands the server end to `accept`. */
export interface WebSocketUpgrader {
  /**
   * Returns the response that completes (or, on runtimes that finish the handshake after the
   * handler returns, stands for) the upgrade. `accept` is called once with the server socket,
   * possibly after this returns.
   */
  upgrade(
    request: Request,
    runtime: unknown,
    accept: (socket: WebSocket) => void,
  ): Response | Promise<Response>;
}

/**
 * The key under which a serving helper places its upgrader on the `env` object it passes to
 * `fetch`. A registered symbol, so two copies of the library agree on it.
 */
export const SVC_WEBSOCKET_UPGRADER: unique symbol = Symbol.for('svcplane.websocket-upgrader');

function isUpgrader(value: unknown): value is WebSocketUpgrader {
  return value !== null && typeof value === 'object' &&
    typeof (value as { upgrade?: unknown }).upgrade === 'function';
}

/**
 * Returns a copy of `env` (any own enumerable fields of an object, else nothing) carrying
 * `upgrader` under {@link SVC_WEBSOCKET_UPGRADER}. Serving helpers call it per request.
 */
export function withWebSocketUpgrader(
  env: unknown,
  upgrader: WebSocketUpgrader,
): Record<PropertyKey, unknown> {
  const base = env !== null && typeof env === 'object' ? env : {};
  return { ...base, [SVC_WEBSOCKET_UPGRADER]: upgrader };
}

/** The upgrader a serving helper placed on `runtime`, if any. */
function upgraderOnRuntime(runtime: unknown): WebSocketUpgrader | undefined {
  if (runtime === null || typeof runtime !== 'object') return undefined;
  const candidate = (runtime as Record<PropertyKey, unknown>)[SVC_WEBSOCKET_UPGRADER];
  return isUpgrader(candidate) ? candidate : undefined;
}

interface WebSocketPairLike {
  0: WebSocket & { accept(): void };
  1: WebSocket;
}

type WebSocketPairConstructor = new () => WebSocketPairLike;

function webSocketPairConstructor(): WebSocketPairConstructor | undefined {
  const candidate = (globalThis as { WebSocketPair?: unknown }).WebSocketPair;
  return typeof candidate === 'function' ? candidate as WebSocketPairConstructor : undefined;
}

/**
 * The Workers upgrader: a `WebSocketPair`, the server end accepted and handed over, the client
 * end returned in a `101` response.
 */
export const webSocketPairUpgrader: WebSocketUpgrader = {
  upgrade(_request, _runtime, accept) {
    const Pair = webSocketPairConstructor();
    if (Pair === undefined) {
      throw new Error('WebSocketPair is not available in this runtime');
    }
    const pair = new Pair();
    const server = pair[0];
    server.accept();
    accept(server);
    return new Response(null, { status: 101, webSocket: pair[1] } as ResponseInit);
  },
};

/**
 * Picks the upgrader for a request: `explicit` first, then one a serving helper placed on the
 * runtime/env object, then the Workers upgrader when `WebSocketPair` exists. `undefined` means
 * this runtime cannot upgrade here (serve through a helper, or pass an upgrader).
 */
export function resolveWebSocketUpgrader(
  runtime: unknown,
  explicit?: WebSocketUpgrader,
): WebSocketUpgrader | undefined {
  if (explicit !== undefined) return explicit;
  const placed = upgraderOnRuntime(runtime);
  if (placed !== undefined) return placed;
  return webSocketPairConstructor() !== undefined ? webSocketPairUpgrader : undefined;
}

/** Whether a request asks to upgrade to WebSocket (`Upgrade: websocket`, case-insensitive). */
export function isWebSocketUpgradeRequest(request: Request): boolean {
  const upgrade = request.headers.get('upgrade');
  if (upgrade === null) return false;
  return upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
}
