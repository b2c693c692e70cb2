/**
 * The measured costs an algorithm carries in its registry entry, which `sluice plan`
 * multiplies. Each figure was measured by this project on its benchmark machine
 * (2 × AMD EPYC, Node 20.20.2, Redis 7.0.15 on loopback) and names the file and row it
 * comes from; rerun the bench and update them together. Another machine's figures differ:
 * plan with margin (`targetUtilization`).
 */

/** One measured figure and where it was read. */
export interface Measured {
  readonly value: number;
  /** `µs`, `B` or `connections`. */
  readonly unit: string;
  /** The file, table and row the figure is read from. */
  readonly source: string;
}

/** What one bucket of an algorithm costs its Redis. */
export interface AlgorithmCosts {
  /**
   * Redis process CPU per decision, in µs (`INFO cpu` of redis-server divided by decisions;
   * coalesced calls at 64 concurrent checks, Zipf(1) over 100,000 keys, all allowed). It
   * includes networking and the event loop, not only the script, so it is the figure to
   * size a Redis core with.
   */
  readonly redisCpuUsPerDecision: Measured;
  /**
   * Redis `used_memory` per live bucket, in bytes (key, value, dictionary entry and expiry
   * entry), with one unit admitted.
   */
  readonly redisBytesPerBucket: Measured;
  /**
   * Bytes each further admitted unit adds, for an algorithm whose state grows with what it
   * admitted (the sliding log). A plan sizes such a bucket at its full capacity.
   */
  readonly redisBytesPerExtraUnit?: Measured;
}

/** The full bench run the CPU figures come from. */
export const BENCH_FULL_RUN =
  'bench/results/2026-11-30.md (full run of 12:04 UTC, docs/benchmarks.md "Fourth round")';

/** The table the memory figures come from. */
export const MEMORY_TABLE =
  'docs/redis.md "Memory per bucket" (bench/redis-memory.ts, 10,000 buckets per row, 34-character keys)';

/** A CPU figure read from row `row` of {@link BENCH_FULL_RUN}. */
export function benchedCpu(value: number, row: string): Measured {
  return Object.freeze({ unit: 'µs', value, source: `${BENCH_FULL_RUN}, row ${row}` });
}

/** A memory figure read from row `row` of {@link MEMORY_TABLE}. */
export function measuredBytes(value: number, row: string): Measured {
  return Object.freeze({ unit: 'B', value, source: `${MEMORY_TABLE}, row ${row}` });
}

/**
 * The bytes of a bucket holding `units` admitted units: its base figure, plus the growth
 * per further unit where its state grows.
 */
export function bucketBytes(costs: AlgorithmCosts, units: number): number {
  const extra = costs.redisBytesPerExtraUnit?.value ?? 0;
  return costs.redisBytesPerBucket.value + extra * Math.max(0, units - 1);
}

/**
 * A CPU figure for an algorithm that was not benchmarked: another's, read from row `row` of
 * {@link BENCH_FULL_RUN}, with `why` it stands in.
 */
export function borrowedCpu(value: number, row: string, why: string): Measured {
  return Object.freeze({
    unit: 'µs',
    value,
    source: `not benchmarked; ${why} (${BENCH_FULL_RUN}, row ${row})`,
  });
}
