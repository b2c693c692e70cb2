import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../../src/algorithms/algorithm.js';

describe('waitUntil', () => {
  it('returns a wait that reaches the target in doubles and overshoots by a few ulps at most', () => {
    const t = fc.oneof(
      fc.double({ min: -1e16, max: 1e16, noNaN: true }),
      fc.integer(),
      fc.constant(1.7e12 + 0.25),
    );
    fc.assert(
      fc.property(t, t, (nowMs, targetMs) => {
        const w = waitUntil(nowMs, targetMs);
        expect(nowMs + w).toBeGreaterThanOrEqual(targetMs);
        const ulps = 16 * Math.max(1, Math.abs(nowMs), Math.abs(targetMs)) * Number.EPSILON;
        expect(w - (targetMs - nowMs)).toBeLessThanOrEqual(ulps);
      }),
      { numRuns: 10_000 },
    );
  });

  it('is exact when the difference is exact', () => {
    expect(waitUntil(1_700_000_000_000, 1_700_000_001_000)).toBe(1_000);
    expect(waitUntil(-1_048_577, 1_000_001)).toBe(2_048_578);
  });
});
