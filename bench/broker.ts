/**
 * Broker benchmarks: a brokered session (caller → plane's `/rpc` → service) against a direct
 * session with the same service, in the same run, over real loopback sockets (the runtime's
 * serving helper for both the plane and the service).
 *
 * The churn benchmark also reports whether memory and sockets stay flat: the heap after many
 * brokered calls and many brokered sessions opened and closed, and the plane's legs left open.
 */
import { z } from 'zod';
import { abilitySession, disposeAbilitySession } from '../src/caller/ability-session.ts';
import { brokerSession } from '../src/caller/broker-session.ts';
import { httpBatchRpc } from '../src/caller/transports/http-batch.ts';
import type { RpcTransportFactory } from '../src/caller/transports/outbound-metadata.ts';
import { websocketRpc } from '../src/caller/transports/websocket.ts';
import type { FetchTarget, ServedServer } from '../src/adapters/serve-target.ts';
import { createControlPlane } from '../src/plane/control-plane.ts';
import { httpService } from '../src/plane/endpoints.ts';
import { generateSigningKeyEntry } from '../src/plane/signing-keys.ts';
import { defineAbility } from '../src/service/ability.ts';
import { abilityMethod } from '../src/service/method.ts';
import { createService } from '../src/service/service.ts';
import { compareThroughput } from './measure.ts';
import type { Benchmark } from './run.ts';

const PLANE_ID = 'bench-plane';
const INPUT = { id: 'item-42', name: 'bench item', count: 42, tags: ['a', 'b'] };
type Item = typeof INPUT;
interface Api {
  echo(input: Item): Item;
  ticks(input: { n: number }): ReadableStream<{ i: number }>;
}

const itemSchema = z.object({
  id: z.string(),
  name: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()),
});

const ability = defineAbility({
  id: 'bench.echo',
  exposure: 'published',
  scopes: ['bench.read'],
  rpc: { transports: ['http-batch', 'websocket'] },
  methods: {
    echo: abilityMethod({ input: itemSchema, output: itemSchema }),
    ticks: abilityMethod({
      input: z.object({ n: z.number().int() }),
      output: z.object({ i: z.number().int() }),
      stream: true,
    }),
  },
  handler: () => ({
    echo: (input: Item) => input,
    ticks: ({ n }: { n: number }) => {
      let i = 0;
      return new ReadableStream({
        pull(controller) {
          if (i < n) controller.enqueue({ i: i++ });
          else controller.close();
        },
      });
    },
  }),
});

interface Loopback {
  serve(target: FetchTarget): Promise<ServedServer>;
  createWebSocket?: (url: string) => WebSocket;
}

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

/** The plane's legs to the service: sockets it opened and sockets that closed. */
interface LegSockets {
  opened: number;
  closed: number;
}

/** A plane with the broker and the service, both served; direct and brokered sessions to them. */
async function deployment() {
  const { serve, createWebSocket } = await loopback();
  const signingKey = await generateSigningKeyEntry({ kid: 'bench-broker' });
  const legs: LegSockets = { opened: 0, closed: 0 };
  const dial = createWebSocket ?? ((url: string) => new WebSocket(url));
  const countingDial = (url: string) => {
    const socket = dial(url);
    legs.opened++;
    socket.addEventListener('close', () => legs.closed++);
    return socket;
  };
  let serviceUrl = '';
  const plane = createControlPlane({
    id: PLANE_ID,
    signingKeys: [signingKey],
    services: () => [httpService({
      id: 'bench',
      url: serviceUrl,
      createWebSocket: countingDial,
      grants: [{ caller: 'bench-caller', scopes: ['bench.read'] }],
    })],
    rpc: {},
    invocationMiddleware: async (c, next) => {
      c.set('svcCaller' as never, { id: 'bench-caller', kind: 'service' } as never);
      await next();
    },
    log: false,
  });
  const service = createService({
    id: 'bench',
    title: 'Bench',
    version: '1',
    auth: { jwks: await plane.jwks(), issuer: PLANE_ID },
    abilities: [ability],
    logger: false,
  });
  const servedService = await serve(service);
  serviceUrl = servedService.url;
  const servedPlane = await serve(plane);
  const brokerUrl = `${servedPlane.url}/rpc`;
  const requestToken = async () =>
    (await plane.issueCapabilityToken({
      callerServiceId: 'bench-caller',
      callerAccess: 'service',
      targetServiceId: 'bench',
      scopes: ['bench.read'],
    })).token;
  const direct = (transport: RpcTransportFactory) =>
    abilitySession<Api>({
      abilityId: 'bench.echo',
      callerServiceId: 'bench-caller',
      targetServiceId: 'bench',
      scopes: ['bench.read'],
      requestToken,
      transport,
    });
  const serviceRoute = `${servedService.url}/rpc/bench.echo`;
  return {
    legs,
    directSocket: () =>
      direct(websocketRpc(serviceRoute, createWebSocket ? { createWebSocket } : {})),
    directBatch: () => direct(httpBatchRpc(serviceRoute)),
    brokered: (transport: 'websocket' | 'http-batch') =>
      brokerSession<Api>({
        url: brokerUrl,
        targetServiceId: 'bench',
        abilityId: 'bench.echo',
        scopes: ['bench.read'],
        transport,
        ...(transport === 'websocket' && createWebSocket ? { createWebSocket } : {}),
      }),
    async close() {
      await Promise.all([servedPlane.close(), servedService.close()]);
    },
  };
}

async function drain(stream: ReadableStream<{ i: number }>, expected: number): Promise<void> {
  let seen = 0;
  const reader = stream.getReader();
  while (!(await reader.read()).done) seen++;
  if (seen !== expected) throw new Error(`stream delivered ${seen} of ${expected} items`);
}

function check(output: Item): void {
  if (output.count !== INPUT.count) throw new Error('echo returned the wrong value');
}

function heapUsed(): number {
  const runtime = globalThis as {
    Deno?: { memoryUsage(): { heapUsed: number } };
    process?: { memoryUsage(): { heapUsed: number } };
    gc?: () => void;
  };
  runtime.gc?.();
  return (runtime.Deno?.memoryUsage() ?? runtime.process?.memoryUsage())?.heapUsed ?? 0;
}

/** Calls and sessions for the flatness check (scaled down from 100 000 and 1 000 for 2 busy cores). */
const CHURN_CALLS = 20_000;
const CHURN_SESSIONS = 300;

type Deployment = Awaited<ReturnType<typeof deployment>>;

async function unaryPair(fx: Deployment, transport: 'websocket' | 'http-batch') {
  const brokered = fx.brokered(transport);
  const direct = transport === 'websocket' ? fx.directSocket() : fx.directBatch();
  check(await brokered.echo(INPUT));
  check(await direct.echo(INPUT));
  return { brokered, direct };
}

/** The broker benchmarks run by `npm run bench`. */
export const benchmarks: Benchmark[] = [
  {
    name: 'brokered unary call over WebSocket (vs direct WebSocket session)',
    target: 0.6,
    async run() {
      const fx = await deployment();
      const { brokered, direct } = await unaryPair(fx, 'websocket');
      try {
        return await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) check(await brokered.echo(INPUT));
          },
          async (count) => {
            for (let i = 0; i < count; i++) check(await direct.echo(INPUT));
          },
          { opsPerRound: 100 },
        );
      } finally {
        disposeAbilitySession(brokered);
        disposeAbilitySession(direct);
        await fx.close();
      }
    },
  },
  {
    name: 'brokered streamed items over WebSocket (vs direct)',
    target: 0.7,
    async run() {
      const fx = await deployment();
      const { brokered, direct } = await unaryPair(fx, 'websocket');
      try {
        return await compareThroughput(
          async (count) => drain(await brokered.ticks({ n: count }), count),
          async (count) => drain(await direct.ticks({ n: count }), count),
          { opsPerRound: 2000 },
        );
      } finally {
        disposeAbilitySession(brokered);
        disposeAbilitySession(direct);
        await fx.close();
      }
    },
  },
  {
    name: 'brokered unary call over HTTP-batch (vs direct HTTP-batch)',
    target: 0.3,
    async run() {
      const fx = await deployment();
      const { brokered, direct } = await unaryPair(fx, 'http-batch');
      try {
        return await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) check(await brokered.echo(INPUT));
          },
          async (count) => {
            for (let i = 0; i < count; i++) check(await direct.echo(INPUT));
          },
          { opsPerRound: 50 },
        );
      } finally {
        disposeAbilitySession(brokered);
        disposeAbilitySession(direct);
        await fx.close();
      }
    },
  },
  {
    name: `brokered WebSocket sessions opened, called once, closed (vs direct; heap/legs flat)`,
    target: 0.3,
    async run() {
      const fx = await deployment();
      const brokeredSession = async () => {
        const session = fx.brokered('websocket');
        check(await session.echo(INPUT));
        disposeAbilitySession(session);
      };
      const directSession = async () => {
        const session = fx.directSocket();
        check(await session.echo(INPUT));
        disposeAbilitySession(session);
      };
      try {
        // Flatness: many calls on one brokered session, then many sessions opened and closed.
        const long = fx.brokered('websocket');
        check(await long.echo(INPUT));
        const heapBefore = heapUsed();
        for (let i = 0; i < CHURN_CALLS; i++) check(await long.echo(INPUT));
        const heapAfterCalls = heapUsed();
        disposeAbilitySession(long);
        for (let i = 0; i < CHURN_SESSIONS; i++) await brokeredSession();
        await new Promise((resolve) => setTimeout(resolve, 500));
        const heapAfterSessions = heapUsed();
        const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
        console.log(
          `  flatness: heap ${mib(heapBefore)} → ${mib(heapAfterCalls)} after ${CHURN_CALLS} ` +
            `brokered calls → ${
              mib(heapAfterSessions)
            } after ${CHURN_SESSIONS} brokered sessions; ` +
            `plane legs opened ${fx.legs.opened}, still open ${fx.legs.opened - fx.legs.closed}`,
        );
        return await compareThroughput(
          async (count) => {
            for (let i = 0; i < count; i++) await brokeredSession();
          },
          async (count) => {
            for (let i = 0; i < count; i++) await directSession();
          },
          { opsPerRound: 10, budgetMs: 500 },
        );
      } finally {
        await fx.close();
      }
    },
  },
];
