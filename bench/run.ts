/**
 * `npm run bench`: runs every benchmark module and prints, per benchmark, our throughput, the
 * throughput of the primitive it wraps (measured interleaved in the same run), their ratio, the
 * noise band of that ratio and the target. On Bun: `bun bench/run.ts`; on Deno:
 * `deno run -A bench/run.ts`.
 *
 * A bench module exports `benchmarks: Benchmark[]`; add it to `MODULES` below. Arguments filter
 * benchmarks by a substring of their name. `--check` exits non-zero when a row stays below its
 * target by more than its noise band after two more tries (timings are not tests: CI never runs
 * this; it is for a quiet machine).
 */

/** What one benchmark run measured. */
export interface Measured {
  /** Operations per second, ours and the primitive's. */
  ours: number;
  primitive: number;
  /** Ours / primitive when the bench computes its own (e.g. the median of paired rounds). */
  ratio?: number;
  /** Half the interquartile range of the paired-round ratios: the run's own noise. */
  noise?: number;
  /** Median latency of one operation, in milliseconds, where the bench records it. */
  p50Ms?: { ours: number; primitive: number };
  /**
   * The ratio the same work reaches with no logic of ours (what the runtime's own objects and
   * crypto calls cost): the ceiling for this runtime.
   */
  floor?: number;
  /** A line printed under the table (what a ratio cannot say: a heap trend). */
  note?: string;
}

/** What one benchmark measured (the name other bench modules import). */
export type BenchmarkResult = Measured;

/** One comparison: `run` measures ours and the primitive, in operations per second. */
export interface Benchmark {
  /** What is measured, naming both sides. */
  name: string;
  /** The minimum acceptable ours / primitive ratio; none for a row shown for information. */
  target?: number;
  run(): Promise<Measured>;
}

const MODULES: (() => Promise<{ benchmarks: Benchmark[] }>)[] = [
  () => import('./tokens.ts'),
  () => import('./rpc.ts'),
  () => import('./issuance.ts'),
  () => import('./mcp.ts'),
  () => import('./rest.ts'),
  () => import('./broker.ts'),
];

function commandLineArguments(): string[] {
  const runtime = globalThis as { process?: { argv: string[] }; Deno?: { args: string[] } };
  if (runtime.Deno !== undefined) return runtime.Deno.args;
  return runtime.process?.argv.slice(2) ?? [];
}

function formatRate(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

function runtimeName(): string {
  const runtime = globalThis as {
    Bun?: { version: string };
    Deno?: { version: { deno: string } };
    process?: { version: string };
  };
  if (runtime.Bun) return `Bun ${runtime.Bun.version}`;
  if (runtime.Deno) return `Deno ${runtime.Deno.version.deno}`;
  return `Node ${runtime.process?.version ?? '?'}`;
}

/** How often `--check` runs a row that is below its target, before calling it a failure. */
const CHECK_TRIES = 3;

function belowTarget(bench: Benchmark, measured: Measured): boolean {
  if (bench.target === undefined) return false;
  const ratio = measured.ratio ?? measured.ours / measured.primitive;
  return ratio < bench.target - (measured.noise ?? 0);
}

/** Runs a row; under `--check`, again while it stays below its target (the best try counts). */
async function measureRow(bench: Benchmark, check: boolean): Promise<Measured> {
  let best = await bench.run();
  for (let tries = 1; check && belowTarget(bench, best) && tries < CHECK_TRIES; tries++) {
    console.error(`  below target, measuring again: ${bench.name}`);
    const next = await bench.run();
    const ratio = (m: Measured) => m.ratio ?? m.ours / m.primitive;
    if (ratio(next) > ratio(best)) best = next;
  }
  return best;
}

function verdict(bench: Benchmark, ratio: number, noise: number | undefined): string {
  if (bench.target === undefined) return '';
  if (ratio >= bench.target) return 'PASS';
  return ratio >= bench.target - (noise ?? 0) ? 'NOISE' : 'BELOW';
}

async function main(): Promise<void> {
  const args = commandLineArguments();
  const check = args.includes('--check');
  const filters = args.filter((arg) => arg !== '--check');
  const rows: string[][] = [
    ['benchmark', 'ops/s', 'primitive ops/s', 'ratio', 'noise', 'target', '', 'p50 ms', 'floor'],
  ];
  let failures = 0;
  const notes: string[] = [];
  console.log(`svcplane benchmarks on ${runtimeName()}`);
  for (const load of MODULES) {
    for (const bench of (await load()).benchmarks) {
      if (filters.length > 0 && !filters.some((filter) => bench.name.includes(filter))) continue;
      const measured = await measureRow(bench, check);
      const { ours, primitive, ratio = ours / primitive, noise, p50Ms, floor, note } = measured;
      if (note !== undefined) notes.push(`${bench.name}: ${note}`);
      if (belowTarget(bench, measured)) failures++;
      rows.push([
        bench.name,
        formatRate(ours),
        formatRate(primitive),
        `${ratio.toFixed(2)}x`,
        noise === undefined ? '' : `±${noise.toFixed(2)}`,
        bench.target === undefined ? '' : `>= ${bench.target}x`,
        verdict(bench, ratio, noise),
        p50Ms === undefined ? '' : `${p50Ms.ours.toFixed(2)} / ${p50Ms.primitive.toFixed(2)}`,
        floor === undefined ? '' : `${floor.toFixed(2)}x`,
      ]);
      console.error(`  measured: ${bench.name}`);
    }
  }
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  for (const row of rows) {
    console.log(
      row.map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])
      )
        .join('  '),
    );
  }
  for (const note of notes) console.log(note);
  if (check && failures > 0) {
    console.log(`${failures} row(s) below target by more than their noise band`);
    const runtime = globalThis as {
      process?: { exitCode?: number };
      Deno?: { exit(code: number): never };
    };
    if (runtime.Deno !== undefined) runtime.Deno.exit(1);
    if (runtime.process !== undefined) runtime.process.exitCode = 1;
  }
}

await main();
