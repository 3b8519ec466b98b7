/**
 * Cloudflare Workers: the `export default` object for a `fetch` target, with WebSocket upgrades
 * through `WebSocketPair`.
 *
 * `serveRpc` also recognises Workers by the `WebSocketPair` global on its own; the entrypoint
 * passes the upgrader explicitly so nothing depends on detection.
 *
 * A caller Worker streams from another Worker over their service binding with
 * `serviceBindingWebSocketFactory(binding)` as the `createWebSocket` of `websocketRpc` or of the
 * plane's `cloudflareServiceBinding`.
 *
 * @module
 */
import {
  webSocketPairUpgrader,
  type WebSocketUpgrader,
  withWebSocketUpgrader,
} from '../service/websocket-upgrade.ts';
import { checkFetchTarget, type FetchTarget } from './serve-target.ts';

export type { FetchTarget } from './serve-target.ts';
/**
 * Client WebSockets through a service binding, for streaming to another Worker:
 * `websocketRpc(url, { createWebSocket: serviceBindingWebSocketFactory(env.ORDERS) })`.
 */
export { serviceBindingWebSocketFactory } from './workers-binding-websocket.ts';

/** The Workers upgrader: `WebSocketPair`, the server end accepted, the client end in a `101`. */
export const workersWebSocketUpgrader: WebSocketUpgrader = webSocketPairUpgrader;

/** The module-worker shape Workers expects as `export default`. */
export interface WorkersEntrypoint {
  /** The Worker's fetch handler: `env` is the Worker's bindings, `ctx` its execution context. */
  fetch(request: Request, env: unknown, ctx: unknown): Promise<Response>;
}

/**
 * Wraps `target` as a Workers entrypoint: `export default workersEntrypoint(service)`. Each
 * request's `env` is the Worker's bindings plus the Workers WebSocket upgrader.
 */
export function workersEntrypoint(target: FetchTarget): WorkersEntrypoint {
  checkFetchTarget(target, 'workersEntrypoint');
  return {
    async fetch(request, env, ctx) {
      return await target.fetch(request, withWebSocketUpgrader(env, workersWebSocketUpgrader), ctx);
    },
  };
}
