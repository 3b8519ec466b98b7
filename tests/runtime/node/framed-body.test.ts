// DOS-08 over a real socket against serveNode (the cases: ../framed-body-scenarios.ts), and the
// caller's side: a compressed batch answer is counted as it decodes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serveNode } from '../../../src/adapters/node.ts';
import { framedBodyScenarios } from '../framed-body-scenarios.ts';

const BOUND = { timeout: 30_000 };

framedBodyScenarios('serveNode', (target) => serveNode(target));

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
