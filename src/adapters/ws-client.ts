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
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import { MAX_WEBSOCKET_PAYLOAD_BYTES } from './serve-target.ts';
import { coalesceFramesPerTurn } from './ws-frame-coalescing.ts';

/** Options of {@link wsWebSocketFactory}. */
export interface WsWebSocketFactoryOptions {
  /** Largest message accepted from the peer, in bytes: an integer from 1 to 2^31-1; default 32 MiB. */
  maxPayload?: number;
}

const FACTORY_OPTION_NAMES: readonly string[] = ['maxPayload'];

/**
 * The largest limit `ws` can hold: it keeps the limit as `maxPayload | 0`, so a larger one
 * wraps (4 GiB becomes 0) and anything below 1 means "no limit".
 */
const MAX_WS_PAYLOAD_LIMIT = 2 ** 31 - 1;

/**
 * The `maxPayload` to give `ws`. A value `ws` would read as "no limit" (0, a negative, NaN, a
 * string, 4 GiB) is refused: it would let a hostile server send a message of any size.
 */
function checkedMaxPayload(value: unknown): number {
  if (value === undefined) return MAX_WEBSOCKET_PAYLOAD_BYTES;
  if (
    typeof value !== 'number' || !Number.isInteger(value) || value < 1 ||
    value > MAX_WS_PAYLOAD_LIMIT
  ) {
    throw new SvcConfigurationError(
      `wsWebSocketFactory: \`maxPayload\` must be an integer from 1 to ${MAX_WS_PAYLOAD_LIMIT} ` +
        `bytes (default ${MAX_WEBSOCKET_PAYLOAD_BYTES})`,
    );
  }
  return value;
}

/** Refuses options that are not an object, or name an option that does not exist. */
function checkFactoryOptions(options: unknown): WsWebSocketFactoryOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError('wsWebSocketFactory: options must be an object');
  }
  // A misspelt `maxPayLoad` would otherwise leave the default in force unnoticed.
  refuseUnknownKeys(options, FACTORY_OPTION_NAMES, 'wsWebSocketFactory');
  return options;
}

/**
 * A WebSocket factory for callers (`websocketRpc(url, { createWebSocket })`) backed by the
 * `ws` client, with Nagle's algorithm off and the frames sent in one turn of the event loop
 * written together (see `ws-frame-coalescing.ts`). It installs no global: the RPC transport
 * compares ready states with the numeric values the WebSocket standard fixes, so it never reads
 * `WebSocket.CONNECTING` from a global. Invalid options throw `SvcConfigurationError` here,
 * not at the first connection.
 */
export function wsWebSocketFactory(
  options: WsWebSocketFactoryOptions = {},
): (url: string) => WebSocket {
  const maxPayload = checkedMaxPayload(checkFactoryOptions(options).maxPayload);
  return (url: string) => {
    const socket = new WsWebSocket(url, { maxPayload });
    // `upgrade` comes before `open`, with the connection every frame is written to.
    socket.once('upgrade', (response) => coalesceFramesPerTurn(socket, response.socket));
    return socket as unknown as WebSocket;
  };
}
