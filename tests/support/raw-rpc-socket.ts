/**
 * A raw in-memory WebSocket to an RPC route, for tests that speak Cap'n Web's wire format
 * themselves (as an attacker would), and what tests watch on an in-memory socket: how it closed
 * and what its caller sent.
 */
import assert from 'node:assert/strict';
import {
  type MemoryFetch,
  type MemoryWebSocketConnection,
  memoryWebSocketFactory,
} from '../../src/testing/mod.ts';

const RPC_URL = 'https://fake.internal/rpc/fake.echo';

/**
 * Opens a raw in-memory WebSocket session with `endpoint`; resolves once the upgrade succeeded
 * and the caller's end is open. `received` collects every message the service sent, in order;
 * `connection` tells how the connection ended.
 */
export async function rawWebSocketSession(
  endpoint: { fetch: MemoryFetch },
  url = RPC_URL,
): Promise<{ client: WebSocket; connection: MemoryWebSocketConnection; received: string[] }> {
  const sockets = memoryWebSocketFactory(endpoint.fetch);
  const client = sockets.createWebSocket(url);
  const [connection] = sockets.connections;
  const received: string[] = [];
  client.addEventListener('message', (event) => received.push(event.data as string));
  const started = Date.now();
  while (client.readyState === 0) {
    if (Date.now() - started > 5_000) throw new Error('the upgrade did not complete');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  assert.equal((await connection.response).status, 200);
  assert.equal(connection.state, 'open');
  return { client, connection, received };
}

/** The close code `connection` reported; fails when it has not closed within `ms`. */
export async function closedWithin(
  connection: MemoryWebSocketConnection,
  ms: number,
): Promise<number> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the socket was not closed')), ms);
  });
  try {
    return (await Promise.race([connection.closed, late])).code;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Records in `into` every message handed to `socket.send`, whatever the socket's state (a send
 * the socket refuses or discards included), then sends it as usual.
 */
export function recordSent(socket: WebSocket, into: unknown[]): void {
  const send = socket.send.bind(socket);
  socket.send = (data) => {
    into.push(data);
    send(data);
  };
}
