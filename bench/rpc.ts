/**
 * RPC benchmarks: the service role (token verified in the session, input and output validated,
 * scopes checked) against raw Cap'n Web doing the same call with none of that, over the same
 * kind of transport, interleaved in the same run.
 *
 * Our side is served by the runtime's serving helper (Node `serveNode`, Bun `serveBun`, Deno
 * `serveDeno`) and called through `abilitySession`. The primitive is raw Cap'n Web on the
 * runtime's plain server and a raw client (see `raw-capnweb.ts`): nothing of ours on either
 * end. In-process HTTP-batch hands each batch to `service.fetch` against raw Cap'n Web's
 * `newHttpBatchRpcResponse`, both given a `Request` built the same way.
 *
 * The HTTP-batch rows also measure their floor in the same run: raw Cap'n Web sending the batch
 * the contract asks for (`authenticate(token)`, then the call on what it returns, pipelined in
 * one request) to a raw target that checks nothing, against the same primitive. What the floor
 * is below 1 is the contract's batch shape, before any work of ours.
 */
import { newHttpBatchRpcResponse, newHttpBatchRpcSession, RpcTarget } from 'capnweb';
import { z } from 'zod';
import { type CapabilityTokenClaims, signCapabilityToken } from '../src/core/capability-token.ts';
import { generateSigningKeyEntry, loadSigningAuthority } from '../src/plane/signing-keys.ts';
import { abilitySession, disposeAbilitySession } from '../src/caller/ability-session.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService, type SvcService } from '../src/service/service.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../src/caller/transports/websocket.ts';
import type { FetchTarget, ServedServer } from '../src/adapters/serve-target.ts';
import { compareConcurrent, compareThroughput } from './measure.ts';
import { rawCapnWebServer, rawHttpBatchMain, rawWebSocketMain } from './raw-capnweb.ts';
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

/**
 * The contract's batch shape with nothing behind it: `authenticate` takes the token unread and
 * returns the raw target.
 */
class RawGate extends RpcTarget {
  authenticate(_token: string): RawBenchTarget {
    return new RawBenchTarget();
  }
}

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

/** Our served service and a raw Cap'n Web server, both on loopback; `close` stops both. */
async function loopbackPair() {
  const { serve, createWebSocket } = await loopback();
  const { service, token } = await benchService();
  const ours = await serve(service);
  const raw = await rawCapnWebServer(() => new RawBenchTarget());
  const rawGate = await rawCapnWebServer(() => new RawGate());
  return {
    ours,
    raw,
    rawGate,
    token,
    createWebSocket,
    close: () => Promise.all([ours.close(), raw.close(), rawGate.close()]),
  };
}

/** Starts both servers and both WebSocket client sessions; `close` ends all four. */
async function webSocketPair() {
  const servers = await loopbackPair();
  const { createWebSocket } = servers;
  const session = sessionOver(
    websocketRpc(`${servers.ours.url}${RPC_PATH}`, createWebSocket ? { createWebSocket } : {}),
    servers.token,
  );
  const rawMain = rawWebSocketMain<RawBenchTarget>(servers.raw.url);
  // First calls open the sockets (and authenticate ours) outside the measurement.
  checkEcho(await session.echo(INPUT));
  checkEcho(await rawMain.echo(INPUT));
  return {
    session,
    rawMain,
    async close() {
      disposeAbilitySession(session);
      rawMain[Symbol.dispose]();
      await servers.close();
    },
  };
}

/**
 * Unary calls over loopback HTTP-batch, `concurrency` at a time: each worker has its own
 * session on each side, so every call is one batch (one POST) on both.
 */
async function loopbackHttpBatch(concurrency: number) {
  const servers = await loopbackPair();
  const ourSessions = Array.from(
    { length: concurrency },
    () => sessionOver(httpBatchRpc(`${servers.ours.url}${RPC_PATH}`), servers.token),
  );
  let nextOurs = 0;
  const primitive = async () => {
    using main = rawHttpBatchMain<RawBenchTarget>(servers.raw.url);
    checkEcho(await main.echo(INPUT));
  };
  const options = { opsPerRound: 4 * concurrency, warmupMs: 500, budgetMs: 2000 };
  try {
    const measured = await compareConcurrent(
      async () => {
        const session = ourSessions[nextOurs++ % concurrency];
        checkEcho(await session.echo(INPUT));
      },
      primitive,
      concurrency,
      options,
    );
    const floor = await compareConcurrent(
      async () => {
        using gate = rawHttpBatchMain<RawGate>(servers.rawGate.url);
        checkEcho(await gate.authenticate(servers.token).echo(INPUT));
      },
      primitive,
      concurrency,
      options,
    );
    return { ...measured, floor: floor.ratio };
  } finally {
    for (const session of ourSessions) disposeAbilitySession(session);
    await servers.close();
  }
}

/**
 * Raw Cap'n Web's in-process HTTP batch: its client posts through the global `fetch`, so for
 * this origin the bench hands the request straight to `newHttpBatchRpcResponse`.
 */
const RAW_IN_PROCESS_ORIGIN = 'http://raw-capnweb.bench.internal';
/** The same for the floor's raw target behind `authenticate`. */
const RAW_GATE_IN_PROCESS_ORIGIN = 'http://raw-gate.bench.internal';

function withInProcessRawFetch<T>(run: () => Promise<T>): Promise<T> {
  const original = globalThis.fetch;
  globalThis.fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (request.url.startsWith(RAW_IN_PROCESS_ORIGIN)) {
      return newHttpBatchRpcResponse(request, new RawBenchTarget());
    }
    if (request.url.startsWith(RAW_GATE_IN_PROCESS_ORIGIN)) {
      return newHttpBatchRpcResponse(request, new RawGate());
    }
    return original(request);
  }) as typeof fetch;
  return run().finally(() => {
    globalThis.fetch = original;
  });
}

/** The RPC benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: "unary call over WebSocket (abilitySession vs raw Cap'n Web)",
    target: 0.95,
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
          { opsPerRound: 200, warmupMs: 500, budgetMs: 2000 },
        );
      } finally {
        await pair.close();
      }
    },
  },
  {
    name: "streamed items over WebSocket (validated stream vs raw Cap'n Web stream)",
    target: 0.95,
    async run() {
      const pair = await webSocketPair();
      try {
        return await compareThroughput(
          async (count) => drain(await pair.session.ticks({ n: count }), count),
          async (count) => drain(await pair.rawMain.ticks(count), count),
          { opsPerRound: 5000, warmupMs: 500, budgetMs: 2000 },
        );
      } finally {
        await pair.close();
      }
    },
  },
  {
    name: "unary call over HTTP-batch loopback, c=1 (vs raw Cap'n Web batch)",
    target: 0.8,
    run: () => loopbackHttpBatch(1),
  },
  {
    name: "unary call over HTTP-batch loopback, c=32 (vs raw Cap'n Web batch)",
    run: () => loopbackHttpBatch(32),
  },
  {
    name: "unary call over HTTP-batch in process, c=1 (vs raw Cap'n Web batch)",
    target: 0.7,
    async run() {
      const { service, token } = await benchService();
      using session = sessionOver(httpBatchRpc((request) => service.fetch(request)), token);
      const primitive = async (count: number) => {
        for (let i = 0; i < count; i++) {
          using main = newHttpBatchRpcSession<RawBenchTarget>(RAW_IN_PROCESS_ORIGIN);
          checkEcho(await main.echo(INPUT));
        }
      };
      const options = { opsPerRound: 200, warmupMs: 500, budgetMs: 2000 };
      return await withInProcessRawFetch(async () => {
        const measured = await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) checkEcho(await session.echo(INPUT));
          },
          primitive,
          options,
        );
        const floor = await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) {
              using gate = newHttpBatchRpcSession<RawGate>(RAW_GATE_IN_PROCESS_ORIGIN);
              checkEcho(await gate.authenticate(token).echo(INPUT));
            }
          },
          primitive,
          options,
        );
        return { ...measured, floor: floor.ratio };
      });
    },
  },
];
