/**
 * The fixed window's 2x boundary burst, and token bucket's absence of it (docs/design.md#algorithms-and-their-invariants).
 * The same traffic goes through each algorithm: 100 requests of 1 unit at t = 999 ms,
 * the last ms of window [0, 1000), then 100 more at t = 1000 ms, the first ms of the next.
 */
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { slidingLog } from '../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';

/** Units admitted at each instant, 100 requests of cost 1 per instant, on one fresh key. */
function admittedAt<P, S>(
  alg: Algorithm<P, S>,
  params: P,
  instantsMs: readonly number[],
): number[] {
  let state: S | undefined;
  return instantsMs.map((nowMs) => {
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      const t = alg.transition(state, nowMs, 1, params);
      state = t.state;
      if (t.decision.allowed) admitted++;
    }
    return admitted;
  });
}

const window = { limit: 100, window: '1s' };

describe('boundary burst: 100 at t=999ms, 100 at t=1000ms, limit 100/1s', () => {
  it('fixed window admits 200 within 2 ms: each side of the boundary is a fresh window', () => {
    expect(admittedAt(fixedWindow, fixedWindow.paramsSchema.parse(window), [999, 1_000])).toEqual([
      100, 100,
    ]);
  });

  it('token bucket (rate 100/s, burst 100) admits 100 + refill: at most 101', () => {
    const params = tokenBucket.paramsSchema.parse({ rate: 100, period: '1s', burst: 100 });
    const [first, second] = admittedAt(tokenBucket, params, [999, 1_000]);
    // Full bucket at 999: 100. In the 1 ms to 1000 it refills 100 / 1000 = 0.1 token,
    // less than one request's cost: 0 more.
    expect(first).toBe(100);
    expect(second).toBe(0);
    expect(first! + second!).toBeLessThanOrEqual(101);
  });

  it('the sliding algorithms admit 100: the 999 ms requests still count at 1000 ms', () => {
    expect(admittedAt(slidingLog, slidingLog.paramsSchema.parse(window), [999, 1_000])).toEqual([
      100, 0,
    ]);
    const swc = slidingWindowCounter.paramsSchema.parse(window);
    // At 1000 the previous window's 100 has full weight: estimate 100, nothing fits.
    expect(admittedAt(slidingWindowCounter, swc, [999, 1_000])).toEqual([100, 0]);
  });
});
