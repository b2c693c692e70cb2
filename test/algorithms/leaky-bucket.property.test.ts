import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  leakyBucket,
  type LeakyBucketMode,
  type LeakyBucketParams,
} from '../../src/algorithms/leaky-bucket.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import { describeInvariants, expectEquivalent, NUM_RUNS, run, scenarioArb } from './invariants.js';

const paramsArb = (mode: LeakyBucketMode): fc.Arbitrary<LeakyBucketParams> =>
  fc.record({
    rate: fc.oneof(
      fc.integer({ min: 1, max: 10_000 }),
      fc.double({ min: 0.01, max: 1000, noNaN: true }),
    ),
    periodMs: fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000),
    capacity: fc.integer({ min: 1, max: 1_000 }),
    mode: fc.constant(mode),
  });

const scenario = (mode: LeakyBucketMode, forwardOnly: boolean) =>
  scenarioArb(
    paramsArb(mode),
    (p) => p.periodMs,
    (p) => p.capacity,
    80,
    forwardOnly,
  );

describe('leaky-bucket, mode reject', () => {
  describeInvariants(leakyBucket, paramsArb('reject'), (p) => p.periodMs);
});
describe('leaky-bucket, mode delay', () => {
  describeInvariants(leakyBucket, paramsArb('delay'), (p) => p.periodMs);
});

describe('leaky-bucket: specific properties', () => {
  it('reject mode decides like a token bucket with burst = capacity, time going back too', () => {
    fc.assert(
      fc.property(scenario('reject', false), ({ params, steps }) => {
        const tb = { rate: params.rate, periodMs: params.periodMs, burst: params.capacity };
        const l = run(leakyBucket, params, steps).decisions;
        const t = run(tokenBucket, tb, steps).decisions;
        l.forEach((d, i) => {
          expectEquivalent(d, t[i]!);
          expect(Object.hasOwn(d, 'delayMs')).toBe(false);
        });
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('delay mode admits and denies exactly like reject mode; only admissions carry delayMs', () => {
    fc.assert(
      fc.property(scenario('delay', false), ({ params, steps }) => {
        const delayed = run(leakyBucket, params, steps).decisions;
        const rejected = run(leakyBucket, { ...params, mode: 'reject' }, steps).decisions;
        delayed.forEach((d, i) => {
          const { delayMs, ...rest } = d;
          expect(rest).toEqual(rejected[i]);
          expect(Object.hasOwn(d, 'delayMs')).toBe(d.allowed);
          if (d.allowed) expect(delayMs).toBeGreaterThanOrEqual(0);
        });
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('delay mode releases admitted requests in order, spaced by their cost at the rate', () => {
    fc.assert(
      fc.property(scenario('delay', true), ({ params, steps }) => {
        const unitMs = params.periodMs / params.rate;
        // Float rounding: 1e-6 ms, or 1e-6 of one unit's interval when that is longer than
        // 1ms: admitting an exact fit may drop FIT_EPSILON = 1e-9 units from the queue, i.e.
        // 1e-9 × unitMs, and releases hours away only resolve to 1e-12 of their size.
        const toleranceMs = 1e-6 * Math.max(1, unitMs);
        const { decisions } = run(leakyBucket, params, steps, 0);
        let nowMs = 0;
        let prev: { releaseMs: number; cost: number } | undefined;
        decisions.forEach((d, i) => {
          nowMs += steps[i]!.dtMs;
          if (!d.allowed) return;
          const releaseMs = nowMs + d.delayMs!;
          if (prev !== undefined) {
            expect(releaseMs).toBeGreaterThanOrEqual(prev.releaseMs - toleranceMs);
            expect(releaseMs - prev.releaseMs).toBeGreaterThanOrEqual(
              prev.cost * unitMs - toleranceMs,
            );
          }
          prev = { releaseMs, cost: steps[i]!.cost };
        });
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
