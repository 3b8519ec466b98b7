// DOS-08 over a real socket: `serveNode` marks request bodies as framed by Node's HTTP parser, so
// a bounded read takes the whole-body fast path when the declared length fits. A raw socket
// stands for a client whose Content-Length lies either way, or who sends no length at all.
import assert from 'node:assert/strict';
import { connect as connectTcp } from 'node:net';
import { test } from 'node:test';
import { serveNode } from '../../../src/adapters/node.ts';
import { BodyReadTimeout, readBoundedText } from '../../../src/core/bounded-body.ts';

const BOUND = { timeout: 30_000 };
const LIMIT = 16;

/** Reads each body with the limit and a short timeout; answers what it read, or why not. */
async function boundedEcho() {
  const read: number[] = [];
  const server = await serveNode({
    async fetch(request) {
      try {
        const text = await readBoundedText(request, LIMIT, { timeoutMs: 200 });
        if (text === undefined) return new Response('too large', { status: 413 });
        read.push(text.length);
        return new Response(text);
      } catch (error) {
        if (error instanceof BodyReadTimeout) return new Response('slow', { status: 408 });
        throw error;
      }
    },
  });
  return { server, read, port: Number(new URL(server.url).port) };
}

/** Writes `payload` and collects the reply until the server closes or `ms` pass. */
function exchange(port: number, payload: string | Buffer, ms = 3_000) {
  return new Promise<{ reply: string; closedByServer: boolean }>((resolve) => {
    const socket = connectTcp(port, '127.0.0.1');
    let reply = '';
    const finish = (closedByServer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ reply, closedByServer });
    };
    const timer = setTimeout(() => finish(false), ms);
    socket.on('data', (chunk: Buffer) => (reply += chunk.toString('latin1')));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.write(payload);
  });
}

function head(headers: string[]): string {
  return ['POST /batch HTTP/1.1', 'Host: x', ...headers, '', ''].join('\r\n');
}

test(
  'DOS-08 a Content-Length that understates the body: only the declared bytes are read',
  BOUND,
  async () => {
    const { server, read, port } = await boundedEcho();
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
  'DOS-08 a Content-Length that overstates the body: a 408 after the timeout, and the connection ends',
  BOUND,
  async () => {
    const { server, read, port } = await boundedEcho();
    try {
      const { reply, closedByServer } = await exchange(port, head(['Content-Length: 10']) + 'abc');
      assert.match(reply, /^HTTP\/1\.1 408 /);
      assert.equal(closedByServer, true);
      assert.deepEqual(read, []);
    } finally {
      await server.close();
    }
  },
);

test('DOS-08 a chunked body with no Content-Length is cut off past the limit', BOUND, async () => {
  const { server, read, port } = await boundedEcho();
  try {
    const chunk = 'y'.repeat(4096);
    const chunks = Array.from({ length: 64 }, () => `${(4096).toString(16)}\r\n${chunk}\r\n`);
    const { reply } = await exchange(
      port,
      head(['Transfer-Encoding: chunked', 'Connection: close']) + chunks.join('') + '0\r\n\r\n',
    );
    assert.match(reply, /^HTTP\/1\.1 413 /);
    assert.deepEqual(read, []);
  } finally {
    await server.close();
  }
});

test('a declared length within the limit is read whole and intact', BOUND, async () => {
  const { server, read, port } = await boundedEcho();
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

test(
  'DOS-08 (caller) a compressed batch answer is counted as it decodes: a small declared length is no licence to buffer',
  BOUND,
  async () => {
    const { createServer } = await import('node:http');
    const { gzipSync } = await import('node:zlib');
    const { abilitySession } = await import('../../../src/caller/ability-session.ts');
    const { httpBatchRpc, MAX_BATCH_RESPONSE_BYTES } = await import(
      '../../../src/caller/transports/http-batch.ts'
    );
    const { svcErrorInfo } = await import('../../../src/core/errors.ts');
    // Declares about 40 KiB; decodes to more than the caller's whole answer limit.
    const bomb = gzipSync(Buffer.alloc(MAX_BATCH_RESPONSE_BYTES + 8 * 1024 * 1024, 0x5b));
    const server = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, {
          'Content-Type': 'text/plain; charset=utf-8',
          'Content-Encoding': 'gzip',
          'Content-Length': String(bomb.byteLength),
        });
        response.end(bomb);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      using session = abilitySession<{ echo(input: unknown): Promise<unknown> }>({
        abilityId: 'svc-a.echo',
        callerServiceId: 'caller',
        targetServiceId: 'svc-a',
        scopes: ['svc-a.read'],
        requestToken: () => Promise.resolve('token'),
        transport: httpBatchRpc(`http://127.0.0.1:${port}/rpc/svc-a.echo`),
      });
      const failure = await session.echo({}).then(() => undefined, (error) => svcErrorInfo(error));
      assert.equal(failure?.reason, 'rpc_response_too_large');
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  },
);
