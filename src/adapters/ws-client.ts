/**
 * A WebSocket client for callers backed by the `ws` package, shared by the Node and Deno
 * adapters.
 *
 * Node 20 has no global `WebSocket`. Deno has one, but its client leaves Nagle's algorithm on:
 * Cap'n Web sends a call as two frames (`push`, then `pull`), so the second waits for the
 * peer's delayed ACK, about 40 ms per call on Linux. `ws` turns Nagle off on every socket it
 * opens, and runs on Deno through its Node compatibility layer.
 *
 * @module
 */
import { WebSocket as WsWebSocket } from 'ws';
import { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';

/** Options of {@link wsWebSocketFactory}. */
export interface WsWebSocketFactoryOptions {
  /** Largest message accepted from the peer, in bytes; default 32 MiB. */
  maxPayload?: number;
}

/**
 * A WebSocket factory for callers (`websocketRpc(url, { createWebSocket })`) backed by the
 * `ws` client, with Nagle's algorithm off. It installs no global: the RPC transport compares
 * ready states with the numeric values the WebSocket standard fixes, so it never reads
 * `WebSocket.CONNECTING` from a global.
 */
export function wsWebSocketFactory(
  options: WsWebSocketFactoryOptions = {},
): (url: string) => WebSocket {
  const maxPayload = options.maxPayload ?? MAX_WEBSOCKET_PAYLOAD_BYTES;
  return (url: string) => new WsWebSocket(url, { maxPayload }) as unknown as WebSocket;
}
