/**
 * Timing for benchmarks that compare an operation of ours with the primitive it wraps, measured
 * in the same run: both warm up, then run in alternating rounds, so drift in CPU frequency,
 * garbage collection or background load hits both sides alike.
 */

/** One side of a comparison: a round runs `count` operations. */
export type RoundRunner = (count: number) => Promise<void>;

/** Options of {@link compareThroughput}. */
export interface CompareOptions {
  /**
   * Operations per round to start from (each side; default 16). Rounds grow until one lasts
   * long enough to time reliably, up to `maxOpsPerRound`.
   */
  opsPerRound?: number;
  /** Upper bound on operations per round (e.g. the size of a pool of unseen inputs). */
  maxOpsPerRound?: number;
  /** Total measured time per side, in milliseconds (default 1000). */
  budgetMs?: number;
  /** Warm-up time per side before measuring, in milliseconds (default 200). */
  warmupMs?: number;
  /** Called before each round of ours (e.g. to give it fresh, never-seen inputs). */
  beforeOursRound?: () => void | Promise<void>;
  /** Called once both sides warmed up, before the first measured round. */
  onMeasureStart?: () => void;
}

/** Operations per second of each side, and the ratio ours / primitive. */
export interface Throughput {
  ours: number;
  primitive: number;
  /**
   * Median over adjacent round pairs of ours / primitive: a load spike on a shared machine
   * skews one pair, not the result.
   */
  ratio: number;
  /**
   * The noise band of `ratio`: half the interquartile range of the round-pair ratios. Two runs
   * on the same code differ by about this much; a ratio below its target by less is noise.
   */
  noise: number;
}

// Rounds shorter than this are dominated by timer resolution (some runtimes coarsen
// performance.now() to a millisecond or more).
const MIN_ROUND_MS = 20;
// Never let a benchmark run away, whatever the clock does.
const MAX_WALL_MS = 15_000;

async function timedRound(run: RoundRunner, count: number, before?: () => void | Promise<void>) {
  await before?.();
  const started = performance.now();
  await run(count);
  return performance.now() - started;
}

/** The value below which a `fraction` of `values` lie (linear between neighbours). */
export function quantile(values: number[], fraction: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * fraction;
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below);
}

/** Doubles the round size until a round lasts MIN_ROUND_MS, warming the side up meanwhile. */
async function calibrate(
  run: RoundRunner,
  options: CompareOptions,
  before?: () => void | Promise<void>,
): Promise<number> {
  const max = options.maxOpsPerRound ?? Number.MAX_SAFE_INTEGER;
  let count = Math.min(options.opsPerRound ?? 16, max);
  let spent = 0;
  for (;;) {
    const elapsed = await timedRound(run, count, before);
    spent += elapsed;
    if (elapsed < MIN_ROUND_MS && count < max) {
      count = Math.min(count * 2, max);
      continue;
    }
    if (spent >= (options.warmupMs ?? 200)) return count;
  }
}

/**
 * Runs `ours` and `primitive` in alternating rounds until each has used about `budgetMs`, and
 * returns their throughput in operations per second.
 */
export async function compareThroughput(
  ours: RoundRunner,
  primitive: RoundRunner,
  options: CompareOptions = {},
): Promise<Throughput> {
  const { budgetMs = 1000, beforeOursRound } = options;
  const oursCount = await calibrate(ours, options, beforeOursRound);
  const primitiveCount = await calibrate(primitive, options);
  options.onMeasureStart?.();
  let oursMs = 0;
  let primitiveMs = 0;
  const pairRatios: number[] = [];
  const started = performance.now();
  while (
    (oursMs < budgetMs || primitiveMs < budgetMs) && performance.now() - started < MAX_WALL_MS
  ) {
    // Alternate which side goes first so neither always runs on a freshly collected heap.
    let oursRound: number;
    let primitiveRound: number;
    if (pairRatios.length % 2 === 0) {
      oursRound = await timedRound(ours, oursCount, beforeOursRound);
      primitiveRound = await timedRound(primitive, primitiveCount);
    } else {
      primitiveRound = await timedRound(primitive, primitiveCount);
      oursRound = await timedRound(ours, oursCount, beforeOursRound);
    }
    oursMs += oursRound;
    primitiveMs += primitiveRound;
    pairRatios.push((oursCount / oursRound) / (primitiveCount / primitiveRound));
  }
  return {
    ours: (pairRatios.length * oursCount * 1000) / oursMs,
    primitive: (pairRatios.length * primitiveCount * 1000) / primitiveMs,
    ratio: quantile(pairRatios, 0.5),
    noise: (quantile(pairRatios, 0.75) - quantile(pairRatios, 0.25)) / 2,
  };
}

/** Throughput of both sides, with the median latency of one operation on each. */
export interface LatencyThroughput extends Throughput {
  p50Ms: { ours: number; primitive: number };
}

/**
 * Like {@link compareThroughput}, for operations run `concurrency` at a time (each worker
 * starts its next operation when its last one ends), recording every operation's latency.
 */
export async function compareConcurrent(
  ours: () => Promise<void>,
  primitive: () => Promise<void>,
  concurrency: number,
  options: CompareOptions = {},
): Promise<LatencyThroughput> {
  const latencies = { ours: [] as number[], primitive: [] as number[] };
  const runner = (operation: () => Promise<void>, into: number[]): RoundRunner => {
    return async (count) => {
      let started = 0;
      const worker = async () => {
        while (started < count) {
          started++;
          const begin = performance.now();
          await operation();
          into.push(performance.now() - begin);
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
    };
  };
  const measured = await compareThroughput(
    runner(ours, latencies.ours),
    runner(primitive, latencies.primitive),
    {
      ...options,
      onMeasureStart() {
        latencies.ours.length = 0;
        latencies.primitive.length = 0;
        options.onMeasureStart?.();
      },
    },
  );
  return {
    ...measured,
    p50Ms: { ours: quantile(latencies.ours, 0.5), primitive: quantile(latencies.primitive, 0.5) },
  };
}
