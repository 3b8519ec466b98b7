/**
 * `npm run bench`: runs every benchmark module and prints, per benchmark, our throughput, the
 * throughput of the primitive it wraps (measured in the same run), their ratio and the target.
 *
 * A bench module exports `benchmarks: Benchmark[]`; add it to `MODULES` below. Optional
 * arguments filter benchmarks by a substring of their name.
 */

/** What one benchmark measured. */
export interface BenchmarkResult {
  ours: number;
  primitive: number;
  ratio?: number;
  floor?: number;
  /** A line printed under the table (what a ratio cannot say: a heap trend). */
  note?: string;
}

/** One comparison: `run` measures ours and the primitive, in operations per second. */
export interface Benchmark {
  /** What is measured, naming both sides. */
  name: string;
  /** The minimum acceptable ours / primitive ratio. */
  target: number;
  /**
   * Throughput of both sides; `ratio` (ours / primitive) when the bench computes its own;
   * `floor`, when measured, the ratio the same work reaches with no logic of ours (what the
   * runtime's own objects and crypto calls cost): the ceiling for this runtime.
   */
  run(): Promise<BenchmarkResult>;
}

const MODULES: (() => Promise<{ benchmarks: Benchmark[] }>)[] = [
  () => import('./tokens.ts'),
  () => import('./rpc.ts'),
  () => import('./issuance.ts'),
  () => import('./rest.ts'),
  () => import('./broker.ts'),
];

function commandLineFilters(): string[] {
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

async function main(): Promise<void> {
  const filters = commandLineFilters();
  const rows: string[][] = [
    ['benchmark', 'ops/s', 'primitive ops/s', 'ratio', 'target', '', 'no-logic floor'],
  ];
  const notes: string[] = [];
  console.log(`svcplane benchmarks on ${runtimeName()}`);
  for (const load of MODULES) {
    for (const bench of (await load()).benchmarks) {
      if (filters.length > 0 && !filters.some((filter) => bench.name.includes(filter))) continue;
      const { ours, primitive, ratio = ours / primitive, floor, note } = await bench.run();
      if (note !== undefined) notes.push(`${bench.name}: ${note}`);
      rows.push([
        bench.name,
        formatRate(ours),
        formatRate(primitive),
        `${ratio.toFixed(2)}x`,
        `>= ${bench.target}x`,
        ratio >= bench.target ? 'PASS' : 'BELOW',
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
}

await main();
