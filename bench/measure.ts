/**
 * Timing for benchmarks that compare an operation of ours with the primitive it wraps, measured
 * in the same run: both warm up, then run in alternating rounds, so drift in CPU frequency,
 * garbage collection or background load hits both sides alike.
 */

/** One side of a comparison: a round runs `count` operations. */
export type RoundRunner = (count: number) => Promise<void>;

/** Options of {@link compareThroughput}. */
export interface CompareOptions {
  /** Operations per round (each side). */
  opsPerRound: number;
  /** Total measured time per side, in milliseconds (default 1000). */
  budgetMs?: number;
  /** Warm-up time per side before measuring, in milliseconds (default 200). */
  warmupMs?: number;
  /** Called before each round of ours (e.g. to give it fresh, never-seen inputs). */
  beforeOursRound?: () => void | Promise<void>;
}

/** Operations per second of each side. */
export interface Throughput {
  ours: number;
  primitive: number;
}

async function timedRound(run: RoundRunner, count: number, before?: () => void | Promise<void>) {
  await before?.();
  const started = performance.now();
  await run(count);
  return performance.now() - started;
}

/**
 * Runs `ours` and `primitive` in alternating rounds until each has used about `budgetMs`, and
 * returns their throughput in operations per second.
 */
export async function compareThroughput(
  ours: RoundRunner,
  primitive: RoundRunner,
  options: CompareOptions,
): Promise<Throughput> {
  const { opsPerRound, budgetMs = 1000, warmupMs = 200, beforeOursRound } = options;
  let warmed = 0;
  while (warmed < warmupMs) {
    warmed += await timedRound(ours, opsPerRound, beforeOursRound);
    warmed += await timedRound(primitive, opsPerRound);
  }
  let oursMs = 0;
  let primitiveMs = 0;
  let rounds = 0;
  while (oursMs < budgetMs || primitiveMs < budgetMs) {
    // Alternate which side goes first so neither always runs on a freshly collected heap.
    if (rounds % 2 === 0) {
      oursMs += await timedRound(ours, opsPerRound, beforeOursRound);
      primitiveMs += await timedRound(primitive, opsPerRound);
    } else {
      primitiveMs += await timedRound(primitive, opsPerRound);
      oursMs += await timedRound(ours, opsPerRound, beforeOursRound);
    }
    rounds++;
  }
  return {
    ours: (rounds * opsPerRound * 1000) / oursMs,
    primitive: (rounds * opsPerRound * 1000) / primitiveMs,
  };
}
