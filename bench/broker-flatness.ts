/**
 * Whether brokered sessions leave anything behind: the heap (after a forced collection) and the
 * sockets still open, before and after 100 000 brokered calls on one session and 1 000 brokered
 * WebSocket sessions opened, called once and closed. Runs on its own, since it needs a forced GC:
 *
 *     node --expose-gc --import tsx bench/broker-flatness.ts [calls] [sessions]
 *     deno run -A --v8-flags=--expose-gc bench/broker-flatness.ts [calls] [sessions]
 *     bun bench/broker-flatness.ts [calls] [sessions]
 *
 * Both phases start after a warm-up of the same work: the first sessions grow the heap by the
 * code the engine compiles for them (about 2 MiB on Node over the first thousand), which is not
 * retained per session, so a heap measured from a cold start reads as a leak that is not one.
 */
import { disposeAbilitySession } from '../src/caller/ability-session.ts';
import { check, type Deployment, deployment, INPUT, type SocketCount } from './broker.ts';

const CALLS = 100_000;
const SESSIONS = 1_000;
const WARMUP_CALLS = 10_000;
const WARMUP_SESSIONS = 1_000;
/** Time for closing handshakes and close events to finish before the sockets are counted. */
const SETTLE_MS = 1_000;

interface Runtime {
  gc?: () => void;
  Bun?: { gc(force: boolean): void };
  Deno?: { args: string[]; memoryUsage(): { heapUsed: number } };
  process?: { argv: string[]; memoryUsage(): { heapUsed: number } };
}
const runtime = globalThis as unknown as Runtime;

function forcedCollection(): (() => void) | undefined {
  if (runtime.Bun !== undefined) return () => runtime.Bun!.gc(true);
  return runtime.gc;
}

function argument(index: number, fallback: number): number {
  const args = runtime.Deno?.args ?? runtime.process?.argv.slice(2) ?? [];
  const value = Number(args[index]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The heap after the sockets settled and a few forced collections. */
async function settledHeap(collect: () => void): Promise<number> {
  await sleep(SETTLE_MS);
  for (let i = 0; i < 4; i++) {
    collect();
    await sleep(20);
  }
  return (runtime.Deno?.memoryUsage() ?? runtime.process!.memoryUsage()).heapUsed;
}

async function calls(session: ReturnType<Deployment['brokered']>, count: number) {
  for (let i = 0; i < count; i++) check(await session.echo(INPUT));
}

async function sessions(fx: Deployment, count: number) {
  for (let i = 0; i < count; i++) {
    const session = fx.brokered('websocket');
    check(await session.echo(INPUT));
    disposeAbilitySession(session);
  }
}

const open = (count: SocketCount) => count.opened - count.closed;
const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;

async function main(): Promise<void> {
  const collect = forcedCollection();
  if (collect === undefined) {
    console.error(
      'broker-flatness needs a forced GC: run Node with --expose-gc, Deno with ' +
        '--v8-flags=--expose-gc',
    );
    return;
  }
  const callCount = argument(0, CALLS);
  const sessionCount = argument(1, SESSIONS);
  const fx = await deployment();
  try {
    const long = fx.brokered('websocket');
    await calls(long, WARMUP_CALLS);
    const beforeCalls = await settledHeap(collect);
    await calls(long, callCount);
    const afterCalls = await settledHeap(collect);
    disposeAbilitySession(long);

    await sessions(fx, WARMUP_SESSIONS);
    const beforeSessions = await settledHeap(collect);
    const legsBefore = fx.legs.opened;
    await sessions(fx, sessionCount);
    const afterSessions = await settledHeap(collect);

    console.log(
      `${callCount} brokered calls on one session: heap ${kib(beforeCalls)} → ${kib(afterCalls)} (${
        ((afterCalls - beforeCalls) / callCount).toFixed(2)
      } B per call)`,
    );
    console.log(
      `${sessionCount} brokered sessions opened and closed: heap ${kib(beforeSessions)} → ${
        kib(afterSessions)
      } (${((afterSessions - beforeSessions) / sessionCount).toFixed(0)} B per session); ` +
        `plane legs opened ${fx.legs.opened - legsBefore}, still open ${open(fx.legs)}; ` +
        `caller sockets still open ${open(fx.callerSockets)} of ${fx.callerSockets.opened}`,
    );
  } finally {
    await fx.close();
  }
}

await main();
