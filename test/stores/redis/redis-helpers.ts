/**
 * Small helpers shared by the `*.redis.test.ts` suites of RedisStore.
 */
import type { CheckResult } from '../../../src/limiter/check-result.js';

/** A seeded PRNG (mulberry32): the same seed gives the same sequence on every run. */
export { mulberry32 as seededRandom } from '../../support/random.js';

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
