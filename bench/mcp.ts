/**
 * MCP benchmarks: a warm `tools/call` through the plane's `/mcp` endpoint (gates, invocation
 * middleware, a fresh stateless SDK server, the invocation path minting a delegated token, an
 * HTTP-batch call to a `localService`) against the direct authenticated HTTP-batch call of the
 * same method (a pre-signed token, no plane), in the same run; and streamed items per second
 * aggregated through MCP against the same stream read directly over a loopback WebSocket.
 * The unary row also prints `tools/list` through `/mcp` (the door's own cost, no service call)
 * and the heap before and after 10 000 more tool calls.
 */
import type { MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { type CapabilityTokenClaims, signCapabilityToken } from '../src/core/capability-token.ts';
import { abilitySession, disposeAbilitySession } from '../src/caller/ability-session.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import { websocketRpc } from '../src/caller/transports/websocket.ts';
import { createControlPlane } from '../src/plane/control-plane.ts';
import { httpService, localService } from '../src/plane/endpoints.ts';
import { generateSigningKeyEntry } from '../src/plane/signing-keys.ts';
import { defineAbility } from '../src/service/ability.ts';
import { jwksFromServiceBinding } from '../src/service/jwks-sources.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService } from '../src/service/service.ts';
import type { FetchTarget, ServedServer } from '../src/adapters/serve-target.ts';
import { compareThroughput } from './measure.ts';
import type { Benchmark } from './run.ts';

const PLANE_ID = 'bench-plane';
const SERVICE_ID = 'bench-mcp';
const ABILITY_ID = 'bench-mcp.echo';
const SCOPE = 'bench-mcp.read';

const item = z.object({
  id: z.string(),
  name: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()),
});
type Item = z.infer<typeof item>;
const INPUT: Item = { id: 'item-42', name: 'bench item', count: 42, tags: ['a', 'b'] };

const ability = defineAbility({
  id: ABILITY_ID,
  exposure: 'published',
  scopes: [SCOPE],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    echo: abilityMethod({
      input: item,
      output: item,
      mcp: { name: 'bench_echo', description: 'Echo an item' },
    }),
    ticks: abilityMethod({
      input: z.object({ n: z.number().int().nonnegative() }),
      output: z.object({ i: z.number().int() }),
      stream: true,
      mcp: { name: 'bench_ticks', description: 'Stream n ticks' },
    }),
  },
  handler: () => ({
    echo: (input: Item) => input,
    async *ticks({ n }: { n: number }) {
      for (let i = 0; i < n; i++) yield { i };
    },
  }),
});

interface BenchApi {
  echo(input: Item): Item;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const caller: MiddlewareHandler = async (c, next) => {
  c.set('svcCaller' as never, { id: 'bench-user', kind: 'user' } as never);
  await next();
};

/** A plane and the service it fronts; `endpoint` chooses how the plane reaches the service. */
async function deployment(serveService?: (target: FetchTarget) => Promise<ServedServer>) {
  const holder: { fetch?: (request: Request) => Promise<Response> } = {};
  const signingKey = await generateSigningKeyEntry({ kid: 'bench-mcp' });
  const service = createService({
    id: SERVICE_ID,
    title: 'Bench MCP',
    version: '1',
    auth: {
      issuer: PLANE_ID,
      jwks: jwksFromServiceBinding({ fetch: (request: Request) => holder.fetch!(request) }),
    },
    abilities: [ability],
    logger: false,
  });
  const served = serveService ? await serveService(service) : undefined;
  const createWebSocket = served ? await loopbackWebSocketFactory() : undefined;
  const plane = createControlPlane({
    id: PLANE_ID,
    signingKeys: [signingKey],
    services: [
      served
        ? httpService({
          id: SERVICE_ID,
          url: served.url,
          grants: [{ caller: PLANE_ID, scopes: [SCOPE] }],
          ...(createWebSocket ? { createWebSocket } : {}),
        })
        : localService({
          id: SERVICE_ID,
          service,
          grants: [{ caller: PLANE_ID, scopes: [SCOPE] }],
        }),
    ],
    invocationMiddleware: caller,
    log: false,
  });
  holder.fetch = (request) => plane.fetch(request);
  await plane.ready();
  return { plane, service, served, createWebSocket, signingKey };
}

async function loopbackWebSocketFactory(): Promise<((url: string) => WebSocket) | undefined> {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun !== undefined) return undefined;
  if (runtime.Deno !== undefined) {
    return (await import('../src/adapters/deno.ts')).denoWebSocketFactory();
  }
  return (await import('../src/adapters/node.ts')).nodeWebSocketFactory();
}

async function loopbackServe(): Promise<(target: FetchTarget) => Promise<ServedServer>> {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun !== undefined) return (await import('../src/adapters/bun.ts')).serveBun;
  if (runtime.Deno !== undefined) return (await import('../src/adapters/deno.ts')).serveDeno;
  return (await import('../src/adapters/node.ts')).serveNode;
}

let id = 0;
function mcpCall(name: string, args: unknown): Request {
  return new Request('http://127.0.0.1/mcp', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-11-25',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: ++id,
      method: name === '' ? 'tools/list' : 'tools/call',
      params: name === '' ? {} : { name, arguments: args },
    }),
  });
}

// deno-lint-ignore no-explicit-any
async function mcpResult(
  plane: { fetch(r: Request): Promise<Response> },
  request: Request,
): Promise<any> {
  const body = await (await plane.fetch(request)).json() as { result?: { isError?: boolean } };
  if (body.result === undefined || body.result.isError) {
    throw new Error(`MCP call failed: ${JSON.stringify(body)}`);
  }
  return body.result;
}

/** A token for the direct call, signed by the plane's own key (what the plane would mint). */
async function directToken(signingKey: Awaited<ReturnType<typeof generateSigningKeyEntry>>) {
  const { loadSigningAuthority } = await import('../src/plane/signing-keys.ts');
  const authority = await loadSigningAuthority([signingKey]);
  const now = Math.floor(Date.now() / 1000);
  const claims: CapabilityTokenClaims = {
    iss: PLANE_ID,
    sub: 'bench-caller',
    aud: SERVICE_ID,
    scp: [SCOPE],
    spa: 'service',
    jti: crypto.randomUUID(),
    iat: now,
    nbf: now,
    exp: now + 600,
  };
  return await signCapabilityToken(claims, authority.signer);
}

function session(transport: ReturnType<typeof httpBatchRpc>, token: string) {
  return abilitySession<BenchApi>({
    abilityId: ABILITY_ID,
    callerServiceId: 'bench-caller',
    targetServiceId: SERVICE_ID,
    scopes: [SCOPE],
    requestToken: () => Promise.resolve(token),
    transport,
  });
}

function heapUsed(): number | undefined {
  const runtime = globalThis as {
    Deno?: { memoryUsage(): { heapUsed: number } };
    process?: { memoryUsage(): { heapUsed: number } };
    gc?: () => void;
  };
  runtime.gc?.();
  return (runtime.Deno?.memoryUsage() ?? runtime.process?.memoryUsage())?.heapUsed;
}

const mib = (bytes: number | undefined) =>
  bytes === undefined ? '?' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** The MCP benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'warm MCP tools/call through the plane to a localService (vs direct HTTP-batch call)',
    target: 0.3,
    async run() {
      const { plane, service, signingKey } = await deployment();
      using direct = session(
        httpBatchRpc((request) => service.fetch(request)),
        await directToken(signingKey),
      );
      await mcpResult(plane, mcpCall('bench_echo', INPUT));
      const result = await compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) await mcpResult(plane, mcpCall('bench_echo', INPUT));
        },
        async (count) => {
          for (let i = 0; i < count; i++) await direct.echo(INPUT);
        },
        { opsPerRound: 100 },
      );
      const list = await compareThroughput(
        async (count) => {
          for (let i = 0; i < count; i++) await mcpResult(plane, mcpCall('', {}));
        },
        async (count) => {
          for (let i = 0; i < count; i++) await direct.echo(INPUT);
        },
        { opsPerRound: 100, budgetMs: 500 },
      );
      // Heap flat over 10 000 calls: measured after as many warm-up calls (caches, JIT), with a
      // collection first where the runtime exposes one (node --expose-gc).
      const tenThousandCalls = async () => {
        for (let i = 0; i < 10_000; i++) await mcpResult(plane, mcpCall('bench_echo', INPUT));
      };
      await tenThousandCalls();
      const before = heapUsed();
      await tenThousandCalls();
      const after = heapUsed();
      console.error(
        `  MCP: tools/list through /mcp (door + SDK, no service call) ${
          Math.round(list.ours)
        }/s; ` +
          `heap ${mib(before)} before and ${mib(after)} after 10 000 more tools/call` +
          ((globalThis as { gc?: unknown }).gc ? '' : ' (no gc exposed: garbage included)'),
      );
      return result;
    },
  },
  {
    name: 'streamed items aggregated through MCP tools/call (vs direct WebSocket stream)',
    target: 0.1,
    async run() {
      const { plane, service, served, createWebSocket, signingKey } = await deployment(
        await loopbackServe(),
      );
      void service;
      const direct = session(
        websocketRpc(
          `${served!.url}/rpc/${ABILITY_ID}`,
          createWebSocket ? { createWebSocket } : {},
        ),
        await directToken(signingKey),
      );
      try {
        return await compareThroughput(
          async (count) => {
            const result = await mcpResult(plane, mcpCall('bench_ticks', { n: count }));
            if (result.structuredContent.items.length !== count) throw new Error('items lost');
          },
          async (count) => {
            const reader = (await direct.ticks({ n: count })).getReader();
            let seen = 0;
            while (!(await reader.read()).done) seen++;
            if (seen !== count) throw new Error('items lost');
          },
          { opsPerRound: 1000, maxOpsPerRound: 10_000 },
        );
      } finally {
        disposeAbilitySession(direct);
        await served!.close();
      }
    },
  },
];
