/**
 * DOS-08 over a real socket, for every serving helper that marks request bodies as framed by its
 * runtime's HTTP parser (`serveNode`, `serveBun`, `serveDeno`): a bounded read takes the whole-body fast path
 * when the declared length fits. A raw socket stands for a client whose Content-Length lies
 * either way, or who sends no length at all. Each runtime's test file says how it serves.
 */
import assert from 'node:assert/strict';
import { connect as connectTcp } from 'node:net';
import { test } from 'node:test';
import type { FetchTarget, ServedServer } from '../../src/adapters/serve-target.ts';
import {
  BODY_ABANDONED_HEADERS,
  BodyReadTimeout,
  readBoundedText,
} from '../../src/core/bounded-body.ts';

const BOUND = { timeout: 30_000 };
const LIMIT = 16;

/** How a runtime serves a fetch target on 127.0.0.1. */
export type Serve = (target: FetchTarget) => Promise<ServedServer>;

/**
 * Reads each body with the limit and a short timeout; answers what it read, or why not, as the
 * RPC route does (a body given up on closes its connection).
 */
async function boundedEcho(serve: Serve) {
  const read: number[] = [];
  const server = await serve({
    async fetch(request) {
      try {
        const text = await readBoundedText(request, LIMIT, { timeoutMs: 200 });
        if (text === undefined) return new Response('too large', { status: 413 });
        read.push(text.length);
        return new Response(text);
      } catch (error) {
        if (error instanceof BodyReadTimeout) {
          return new Response('slow', { status: 408, headers: BODY_ABANDONED_HEADERS });
        }
        throw error;
      }
    },
  });
  return { server, read, port: Number(new URL(server.url).port) };
}

/** Writes `payload` and collects the reply until the server closes or `ms` pass. */
function exchange(port: number, payload: string | Uint8Array, ms = 3_000) {
  return new Promise<{ reply: string; closedByServer: boolean }>((resolve) => {
    const socket = connectTcp(port, '127.0.0.1');
    let reply = '';
    const finish = (closedByServer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ reply, closedByServer });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on('data', (chunk: Uint8Array) => (reply += new TextDecoder('latin1').decode(chunk)));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.write(payload);
  });
}

function head(headers: string[]): string {
  return ['POST /batch HTTP/1.1', 'Host: x', ...headers, '', ''].join('\r\n');
}

/** What a runtime's server does beyond what the helper controls. */
export interface FramedBodyServer {
  /**
   * Whether the server ends a connection answered `Connection: close` while the client still
   * owes body bytes. Node and Bun do. Deno's server keeps such a connection (it still waits for
   * the declared bytes) until the client or its own connection handling ends it; the handler is
   * not held, which is what the read's timeout bounds.
   */
  closesOwedBodyConnection: boolean;
}

/** Registers the framed-body cases against `serve` (`name` says which helper). */
export function framedBodyScenarios(
  name: string,
  serve: Serve,
  runtime: FramedBodyServer = { closesOwedBodyConnection: true },
): void {
  test(
    `DOS-08 ${name}: a Content-Length that understates the body: only the declared bytes are read`,
    BOUND,
    async () => {
      const { server, read, port } = await boundedEcho(serve);
      try {
        // What follows the declared 10 bytes is parsed as the next request (and refused as one).
        const { reply } = await exchange(
          port,
          head(['Content-Length: 10']) + 'x'.repeat(1024 * 1024),
        );
        assert.match(reply, /^HTTP\/1\.1 (200|400) /);
        assert.deepEqual(read, [10]);
      } finally {
        await server.close();
      }
    },
  );

  test(
    `DOS-08 ${name}: a Content-Length that overstates the body: a 408 after the timeout${
      runtime.closesOwedBodyConnection ? ', and the connection ends' : ''
    }`,
    BOUND,
    async () => {
      const { server, read, port } = await boundedEcho(serve);
      try {
        const { reply, closedByServer } = await exchange(
          port,
          head(['Content-Length: 10']) + 'abc',
        );
        assert.match(reply, /^HTTP\/1\.1 408 /);
        if (runtime.closesOwedBodyConnection) assert.equal(closedByServer, true);
        assert.deepEqual(read, []);
      } finally {
        await server.close();
      }
    },
  );

  test(
    `DOS-08 ${name}: a chunked body with no Content-Length is cut off past the limit`,
    BOUND,
    async () => {
      const { server, read, port } = await boundedEcho(serve);
      try {
        const chunk = 'y'.repeat(4096);
        const chunks = Array.from({ length: 64 }, () => `${(4096).toString(16)}\r\n${chunk}\r\n`);
        const { reply } = await exchange(
          port,
          head(['Transfer-Encoding: chunked', 'Connection: close']) + chunks.join('') +
            '0\r\n\r\n',
        );
        assert.match(reply, /^HTTP\/1\.1 413 /);
        assert.deepEqual(read, []);
      } finally {
        await server.close();
      }
    },
  );

  test(`${name}: a declared length within the limit is read whole and intact`, BOUND, async () => {
    const { server, read, port } = await boundedEcho(serve);
    try {
      const { reply } = await exchange(
        port,
        head(['Content-Length: 12', 'Connection: close']) + 'hello, there',
      );
      assert.match(reply, /^HTTP\/1\.1 200 /);
      assert.ok(reply.endsWith('hello, there'));
      assert.deepEqual(read, [12]);
    } finally {
      await server.close();
    }
  });
}
