/**
 * RPC benchmarks: the service role (token verified in the session, input and output validated,
 * scopes checked) against raw Cap'n Web doing the same call with none of that, over the same
 * kind of transport, in the same run.
 *
 * WebSocket benchmarks use a real loopback socket on 127.0.0.1 through the runtime's serving
 * helper (Node `serveNode`, Bun `serveBun`, Deno `serveDeno`); both sides use the same socket
 * transport class, so what differs is exactly our layer. The HTTP-batch benchmark runs in
 * process: our session against `service.fetch`, the primitive a plain Hono JSON route called
 * through `app.fetch`.
 */
import { RpcSession, RpcTarget } from 'capnweb';
import { Hono } from 'hono';
import { z } from 'zod';
import { type CapabilityTokenClaims, signCapabilityToken } from '../src/core/capability-token.ts';
import { generateSigningKeyEntry, loadSigningAuthority } from '../src/plane/signing-keys.ts';
import { abilitySession, disposeAbilitySession } from '../src/caller/ability-session.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService, type SvcService } from '../src/service/service.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../src/caller/transports/websocket.ts';
import {
  type RpcWebSocket,
  WebSocketRpcTransport,
} from '../src/service/websocket-rpc-transport.ts';
import { resolveWebSocketUpgrader } from '../src/service/websocket-upgrade.ts';
import type { FetchTarget, ServedServer } from '../src/adapters/serve-target.ts';
import { compareThroughput } from './measure.ts';
import type { Benchmark } from './run.ts';

const ISSUER = 'https://plane.bench';
const SERVICE_ID = 'bench-svc';
const ABILITY_ID = 'bench-svc.echo';
const RPC_PATH = `/rpc/${ABILITY_ID}`;

/** A small, realistic record: what a unary call carries each way. */
interface Item {
  id: string;
  name: string;
  count: number;
  tags: string[];
}

const itemSchema = z.object({
  id: z.string(),
  name: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()),
});

const INPUT: Item = { id: 'item-42', name: 'bench item', count: 42, tags: ['a', 'b'] };

interface BenchApi {
  echo(input: Item): Item;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

class BenchHandler {
  echo(input: Item): Item {
    return input;
  }

  async *ticks({ n }: { n: number }): AsyncGenerator<{ i: number }> {
    for (let i = 0; i < n; i++) yield { i };
  }
}

const benchAbility = defineAbility({
  id: ABILITY_ID,
  exposure: 'published',
  scopes: ['bench-svc.read'],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    echo: abilityMethod({ input: itemSchema, output: itemSchema, scopes: ['bench-svc.read'] }),
    ticks: abilityMethod({
      input: z.object({ n: z.number().int().nonnegative() }),
      output: z.object({ i: z.number().int() }),
      stream: true,
    }),
  },
  // A fresh handler per call, as the contract asks; a class keeps that to one small object.
  handler: () => new BenchHandler(),
});

/** The same two methods with raw Cap'n Web: no token, no schema, no scope. */
class RawBenchTarget extends RpcTarget {
  echo(input: Item): Item {
    return input;
  }

  ticks(n: number): ReadableStream<{ i: number }> {
    let i = 0;
    return new ReadableStream({
      pull(controller) {
        if (i < n) controller.enqueue({ i: i++ });
        else controller.close();
      },
    });
  }
}

/** Serves raw Cap'n Web sessions over the runtime's WebSocket upgrade, nothing else. */
const rawWebSocketTarget: FetchTarget = {
  fetch(request, env) {
    const upgrader = resolveWebSocketUpgrader(env);
    if (upgrader === undefined) return new Response('no upgrader', { status: 426 });
    return upgrader.upgrade(request, env, (socket) => {
      new RpcSession(
        new WebSocketRpcTransport(socket as unknown as RpcWebSocket),
        new RawBenchTarget(),
      );
    });
  },
};

interface Loopback {
  serve(target: FetchTarget): Promise<ServedServer>;
  createWebSocket?: (url: string) => WebSocket;
}

/**
 * The runtime's serving helper and, where the global `WebSocket` is missing (Node 20) or slow
 * (Deno: Nagle's algorithm on), the adapter's client factory.
 */
async function loopback(): Promise<Loopback> {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun !== undefined) {
    const { serveBun } = await import('../src/adapters/bun.ts');
    return { serve: (target) => serveBun(target) };
  }
  if (runtime.Deno !== undefined) {
    const { serveDeno, denoWebSocketFactory } = await import('../src/adapters/deno.ts');
    return { serve: (target) => serveDeno(target), createWebSocket: denoWebSocketFactory() };
  }
  const { serveNode, nodeWebSocketFactory } = await import('../src/adapters/node.ts');
  return { serve: (target) => serveNode(target), createWebSocket: nodeWebSocketFactory() };
}

/** A service with the bench ability, and a token for it signed by a fresh plane key. */
async function benchService(): Promise<{ service: SvcService; token: string }> {
  const authority = await loadSigningAuthority([
    await generateSigningKeyEntry({ kid: 'bench-rpc' }),
  ]);
  const now = Math.floor(Date.now() / 1000);
  const claims: CapabilityTokenClaims = {
    iss: ISSUER,
    sub: 'bench-caller',
    aud: SERVICE_ID,
    scp: ['bench-svc.read'],
    spa: 'service',
    jti: crypto.randomUUID(),
    iat: now,
    nbf: now,
    exp: now + 600,
  };
  const service = createService({
    id: SERVICE_ID,
    title: 'Bench service',
    version: '1.0.0',
    auth: { jwks: authority.jwks, issuer: ISSUER },
    abilities: [benchAbility],
    logger: false,
  });
  return { service, token: await signCapabilityToken(claims, authority.signer) };
}

function sessionOver(transport: ReturnType<typeof httpBatchRpc>, token: string) {
  return abilitySession<BenchApi>({
    abilityId: ABILITY_ID,
    callerServiceId: 'bench-caller',
    targetServiceId: SERVICE_ID,
    scopes: ['bench-svc.read'],
    requestToken: () => Promise.resolve(token),
    transport,
  });
}

/** A raw Cap'n Web client session over the same socket transport class. */
function rawWebSocketSession(url: string, createWebSocket?: (url: string) => WebSocket) {
  const wsUrl = url.replace(/^http/, 'ws');
  const socket = createWebSocket?.(wsUrl) ?? new WebSocket(wsUrl);
  const session = new RpcSession<RawBenchTarget>(
    new WebSocketRpcTransport(socket as unknown as RpcWebSocket),
  );
  return session.getRemoteMain();
}

async function drain(stream: ReadableStream<{ i: number }>, expected: number): Promise<void> {
  const reader = stream.getReader();
  let seen = 0;
  for (;;) {
    const { done } = await reader.read();
    if (done) break;
    seen++;
  }
  if (seen !== expected) throw new Error(`stream delivered ${seen} of ${expected} items`);
}

function checkEcho(output: Item): void {
  if (output.count !== INPUT.count) throw new Error('echo returned the wrong value');
}

/** Starts both WebSocket servers and both client sessions; `close` ends all four. */
async function webSocketPair() {
  const { serve, createWebSocket } = await loopback();
  const { service, token } = await benchService();
  const ours = await serve(service);
  const raw = await serve(rawWebSocketTarget);
  const session = sessionOver(
    websocketRpc(`${ours.url}${RPC_PATH}`, createWebSocket ? { createWebSocket } : {}),
    token,
  );
  const rawMain = rawWebSocketSession(raw.url, createWebSocket);
  // First calls open the sockets (and authenticate ours) outside the measurement.
  checkEcho(await session.echo(INPUT));
  checkEcho(await rawMain.echo(INPUT));
  return {
    session,
    rawMain,
    async close() {
      disposeAbilitySession(session);
      rawMain[Symbol.dispose]();
      await Promise.all([ours.close(), raw.close()]);
    },
  };
}

/** The RPC benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: "unary call over WebSocket (abilitySession vs raw Cap'n Web)",
    target: 0.9,
    async run() {
      const pair = await webSocketPair();
      try {
        return await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) checkEcho(await pair.session.echo(INPUT));
          },
          async (count) => {
            for (let i = 0; i < count; i++) checkEcho(await pair.rawMain.echo(INPUT));
          },
          { opsPerRound: 200 },
        );
      } finally {
        await pair.close();
      }
    },
  },
  {
    name: 'streamed items over WebSocket (validated stream vs raw ReadableStream)',
    target: 0.9,
    async run() {
      const pair = await webSocketPair();
      try {
        return await compareThroughput(
          async (count) => drain(await pair.session.ticks({ n: count }), count),
          async (count) => drain(await pair.rawMain.ticks(count), count),
          { opsPerRound: 5000 },
        );
      } finally {
        await pair.close();
      }
    },
  },
  {
    name: 'authenticated unary call over HTTP-batch in-process (vs Hono JSON route)',
    target: 0.2,
    async run() {
      const { service, token } = await benchService();
      using session = sessionOver(httpBatchRpc((request) => service.fetch(request)), token);
      const app = new Hono();
      app.post('/echo', async (c) => c.json(await c.req.json()));
      const callHono = async () => {
        const response = await app.fetch(
          new Request('http://bench.internal/echo', {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify(INPUT),
          }),
        );
        return await response.json() as Item;
      };
      return await compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) checkEcho(await session.echo(INPUT));
        },
        async (count) => {
          for (let i = 0; i < count; i++) checkEcho(await callHono());
        },
        { opsPerRound: 200 },
      );
    },
  },
];
