import type { AlgorithmKind } from '../core/policy.js';

/**
 * The per-decision costs `sluice plan` multiplies, each measured by this project on its
 * benchmark machine (2 × AMD EPYC, Node 20.20.2, Redis 7.0.15 on loopback). Each constant
 * names the file and figure it comes from; rerun the bench and update them together.
 * Another machine's figures differ: plan with margin (`targetUtilization`).
 */

/** One measured figure and where it was read. */
export interface Measured {
  readonly value: number;
  /** `µs`, `B` or `connections`. */
  readonly unit: string;
  /** The file, table and row the figure is read from. */
  readonly source: string;
}

const FULL_RUN =
  'bench/results/2026-11-30.md (full run of 12:04 UTC, docs/benchmarks.md "Fourth round")';

/**
 * Redis process CPU per decision, in µs (`INFO cpu` of redis-server divided by decisions;
 * coalesced calls at 64 concurrent checks, Zipf(1) over 100,000 keys, all allowed): column
 * "Redis process CPU µs/dec", Sluice side. It includes networking and the event loop, not
 * only the script, so it is the figure to size a Redis core with. Leaky bucket and sliding
 * log were not benchmarked: the leaky bucket has the token bucket's state and step shape,
 * so its figure is used; the sliding log reads its whole set per decision and costs more
 * with its limit, so the token bucket's figure is a floor for it.
 */
export const REDIS_CPU_US_PER_DECISION: Readonly<Record<AlgorithmKind, Measured>> = Object.freeze({
  'token-bucket': { unit: 'µs', value: 14.25, source: `${FULL_RUN}, row redis/c64/zipf/tb/allow` },
  gcra: { unit: 'µs', value: 12.89, source: `${FULL_RUN}, row redis/c64/zipf/gcra/allow` },
  'fixed-window': { unit: 'µs', value: 15.95, source: `${FULL_RUN}, row redis/c64/zipf/fw/allow` },
  'sliding-window-counter': {
    unit: 'µs',
    value: 17.45,
    source: `${FULL_RUN}, row redis/c64/zipf/swc/allow`,
  },
  'leaky-bucket': {
    unit: 'µs',
    value: 14.25,
    source: `not benchmarked; the token bucket's figure (${FULL_RUN}, row redis/c64/zipf/tb/allow)`,
  },
  'sliding-log': {
    unit: 'µs',
    value: 14.25,
    source: `not benchmarked; a floor: the token bucket's figure (${FULL_RUN}, row redis/c64/zipf/tb/allow)`,
  },
});

const MEMORY_TABLE =
  'docs/redis.md "Memory per bucket" (bench/redis-memory.ts, 10,000 buckets per row, 34-character keys)';

/**
 * Redis `used_memory` per live bucket, in bytes (key, value, dictionary entry and expiry
 * entry): column "`used_memory` growth, bytes per bucket". For the sliding log, the
 * figure with one admitted request in the window.
 */
export const REDIS_BYTES_PER_BUCKET: Readonly<Record<AlgorithmKind, Measured>> = Object.freeze({
  'token-bucket': { unit: 'B', value: 187, source: `${MEMORY_TABLE}, row token-bucket` },
  gcra: { unit: 'B', value: 175, source: `${MEMORY_TABLE}, row gcra` },
  'leaky-bucket': { unit: 'B', value: 187, source: `${MEMORY_TABLE}, row leaky-bucket` },
  'fixed-window': { unit: 'B', value: 189, source: `${MEMORY_TABLE}, row fixed-window` },
  'sliding-window-counter': {
    unit: 'B',
    value: 185,
    source: `${MEMORY_TABLE}, row sliding-window-counter`,
  },
  'sliding-log': { unit: 'B', value: 217, source: `${MEMORY_TABLE}, row sliding-log, 1 admitted` },
});

/**
 * Bytes each further admitted request adds to a sliding log: (5,268 − 626) / 90 from the
 * rows with 10 and 100 admitted requests of the same table.
 */
export const SLIDING_LOG_BYTES_PER_ENTRY: Measured = Object.freeze({
  unit: 'B',
  value: 51.6,
  source: `${MEMORY_TABLE}, rows sliding-log 10 and 100 admitted: (5,268 − 626) / 90`,
});

/**
 * Service CPU per call, in µs: `sluice serve` on Redis answering gRPC ShouldRateLimit,
 * 0.71 cores at 2,185 calls/s (one decision per call, 64 callers, load generator on the
 * same 2 cores). One `sluice serve` process runs on one event loop, so it never uses more
 * than about one core.
 */
export const SERVICE_CPU_US_PER_CALL: Measured = Object.freeze({
  unit: 'µs',
  value: (0.71 / 2185) * 1e6,
  source:
    'docs/benchmarks.md "Service" table (bench/results/service-2026-11-30.json), row gRPC ShouldRateLimit / redis: 0.71 cores at 2,185 calls/s',
});

/**
 * Redis connections each Sluice process opens per primary: `RedisStore` keeps one
 * connection of its own (a duplicate of the given client; the seed is closed), and on a
 * Cluster connects each primary as ioredis learns of it, never a read-only replica.
 */
export const CONNECTIONS_PER_PROCESS_PER_PRIMARY: Measured = Object.freeze({
  unit: 'connection',
  value: 1,
  source:
    "src/stores/redis/connection.ts (SafeConnection: the store's own connection; Cluster nodes connected unless readOnly)",
});
