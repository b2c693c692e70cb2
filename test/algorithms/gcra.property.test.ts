import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gcra, type GcraParams } from '../../src/algorithms/gcra.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import {
  describeInvariants,
  expectEquivalent,
  NUM_RUNS,
  run,
  forwardBurstScenario,
} from './invariants.js';

// Emission intervals T = periodMs / rate of at least 1 ms (up to 1000 units/s). The TAT is
// an absolute instant, so its rounding is ulp(nowMs) / T units per admission; below 1 ms
// that approaches the 1e-6 the shared invariants compare with (see gcra.ts, Precision).
const paramsArb: fc.Arbitrary<GcraParams> = fc
  .constantFrom(1, 10, 1_000, 60_000, 3_600_000)
  .chain((periodMs) =>
    fc.record({
      rate: fc.oneof(
        fc.integer({ min: 1, max: Math.min(10_000, periodMs) }),
        fc.double({ min: 0.01, max: Math.min(1_000, periodMs), noNaN: true }),
      ),
      periodMs: fc.constant(periodMs),
      burst: fc.integer({ min: 1, max: 1_000 }),
    }),
  );

describeInvariants(gcra, paramsArb, (p) => p.periodMs);

describe('gcra: specific properties', () => {
  it('decides exactly like a token bucket with the same params while time moves forward', () => {
    fc.assert(
      fc.property(forwardBurstScenario(paramsArb), ({ params, steps: forward }) => {
        // Start at 0: instants stay small, so the TAT rounds far below 1e-6 units.
        const g = run(gcra, params, forward, 0).decisions;
        const t = run(tokenBucket, params, forward, 0).decisions;
        g.forEach((d, i) => expectEquivalent(d, t[i]!));
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('admits a whole burst of unit requests at one epoch-ms instant, whatever the rate', () => {
    fc.assert(
      fc.property(
        paramsArb,
        fc.integer({ min: 1_000_000_000_000, max: 4_000_000_000_000 }),
        (params, nowMs) => {
          const steps = Array.from({ length: params.burst + 1 }, () => ({ dtMs: 0, cost: 1 }));
          const allowed = run(gcra, params, steps, nowMs).decisions.map((d) => d.allowed);
          expect(allowed).toEqual([...Array<boolean>(params.burst).fill(true), false]);
        },
      ),
      { numRuns: NUM_RUNS },
    );
  });
});
