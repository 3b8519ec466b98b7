/**
 * A raw in-memory WebSocket to an RPC route, for tests that speak Cap'n Web's wire format
 * themselves (as an attacker would).
 */
import assert from 'node:assert/strict';
import { type MemoryWebSocket, memoryWebSocketFactory } from './memory-websocket.ts';

const RPC_URL = 'https://fake.internal/rpc/fake.echo';

/** Opens a raw in-memory WebSocket session with `endpoint`; resolves once both ends are open. */
export async function rawWebSocketSession(
  endpoint: { fetch: (request: Request, env?: unknown) => Promise<Response> },
  url = RPC_URL,
) {
  const sockets = memoryWebSocketFactory(endpoint.fetch);
  const client = sockets.createWebSocket(url) as unknown as MemoryWebSocket;
  const received: string[] = [];
  client.addEventListener('message', (event) => received.push(event.data as string));
  const started = Date.now();
  while (client.readyState === 0) {
    if (Date.now() - started > 5_000) throw new Error('the upgrade did not complete');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.deepEqual(sockets.statuses, [200]);
  return { client, server: client.peer!, received };
}

/** Resolves once `socket` is closed, or fails after `ms`. */
export async function closedWithin(socket: { closeCode: number | undefined }, ms: number) {
  const started = Date.now();
  while (socket.closeCode === undefined) {
    if (Date.now() - started > ms) throw new Error('the socket was not closed');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return socket.closeCode;
}
