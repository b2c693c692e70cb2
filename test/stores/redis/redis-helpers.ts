/**
 * Small helpers shared by the `*.redis.test.ts` suites of RedisStore.
 */
import type { CheckResult } from '../../../src/limiter/check-result.js';

/** A seeded PRNG (mulberry32): the same seed gives the same sequence on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** An integer in `[min, max]` from `random`. */
export function randomInt(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

/**
 * True when the store itself decided every policy of the check (no fail-open or
 * fail-closed path): a store error must never be counted as an admission or a denial.
 */
export function decidedByStore(r: CheckResult): boolean {
  return r.decisions.length > 0 && r.decisions.every((d) => d.path === 'store');
}
