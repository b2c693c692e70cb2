import type { Measured } from '../algorithms/costs.js';

/**
 * The per-process costs `sluice plan` multiplies (each algorithm's own costs are in its
 * registry entry, `Algorithm.costs`), each measured by this project on its
 * benchmark machine (2 × AMD EPYC, Node 20.20.2, Redis 7.0.15 on loopback). Each constant
 * names the file and figure it comes from; rerun the bench and update them together.
 * Another machine's figures differ: plan with margin (`targetUtilization`).
 */

export type { Measured } from '../algorithms/costs.js';

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
