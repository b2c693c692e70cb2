/**
 * The float tolerance of "does the cost fit" (FIT_EPSILON, src/algorithms/algorithm.ts):
 * a shortfall of exactly FIT_EPSILON units still fits, twice that does not. At instant 0
 * the clock-rounding part of the tolerance is 0, so FIT_EPSILON is all of it.
 */
import { describe, expect, it } from 'vitest';
import { FIT_EPSILON } from '../../src/algorithms/algorithm.js';
import { gcra } from '../../src/algorithms/gcra.js';
import { leakyBucket } from '../../src/algorithms/leaky-bucket.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';

describe('FIT_EPSILON', () => {
  it('token bucket: 1 - ε tokens admit a cost of 1; 1 - 2ε do not', () => {
    const p = tokenBucket.paramsSchema.parse({ rate: 1, burst: 1 });
    const fits = (tokens: number) =>
      tokenBucket.transition({ tokens, tsMs: 0 }, 0, 1, p).decision.allowed;
    expect(fits(1 - FIT_EPSILON)).toBe(true);
    expect(fits(1 - 2 * FIT_EPSILON)).toBe(false);
  });

  it('leaky bucket: a level of ε leaves room for a cost of 1 in a queue of 1; 2ε does not', () => {
    const p = leakyBucket.paramsSchema.parse({ rate: 1, capacity: 1 });
    const fits = (level: number) =>
      leakyBucket.transition({ level, tsMs: 0 }, 0, 1, p).decision.allowed;
    expect(fits(FIT_EPSILON)).toBe(true);
    expect(fits(2 * FIT_EPSILON)).toBe(false);
  });

  it('GCRA: a TAT ε/2 × T past the tolerance admits a cost of 1; 2ε × T past it does not', () => {
    // T = 1000ms / 100 = 10ms; burst 1: the tolerance is one T
    const p = gcra.paramsSchema.parse({ rate: 100, burst: 1 });
    const fits = (tatMs: number) => gcra.transition({ tatMs }, 0, 1, p).decision.allowed;
    expect(fits((FIT_EPSILON / 2) * 10)).toBe(true);
    expect(fits(2 * FIT_EPSILON * 10)).toBe(false);
  });

  it('sliding window counter: an estimate of ε leaves room for a cost of 1 under limit 1; 2ε does not', () => {
    const p = slidingWindowCounter.paramsSchema.parse({ limit: 1, window: 1_000 });
    // At the start of window 0 the previous window weighs fully: estimate = previous.
    const fits = (previous: number) =>
      slidingWindowCounter.transition({ window: 0, current: 0, previous }, 0, 1, p).decision
        .allowed;
    expect(fits(FIT_EPSILON)).toBe(true);
    expect(fits(2 * FIT_EPSILON)).toBe(false);
  });
});
