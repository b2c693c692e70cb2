import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tokenBucket, type TokenBucketParams } from '../../src/algorithms/token-bucket.js';
import { describeInvariants, forwardBurstScenario, NUM_RUNS, run } from './invariants.js';

const paramsArb: fc.Arbitrary<TokenBucketParams> = fc.record({
  rate: fc.oneof(
    fc.integer({ min: 1, max: 10_000 }),
    fc.double({ min: 0.01, max: 1000, noNaN: true }),
  ),
  periodMs: fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000),
  burst: fc.integer({ min: 1, max: 1_000 }),
});

describeInvariants(tokenBucket, paramsArb, (p) => p.periodMs);

describe('token-bucket: specific properties', () => {
  it('admits at most burst + rate * elapsed over any run (no boundary burst)', () => {
    fc.assert(
      fc.property(forwardBurstScenario(paramsArb), ({ params, steps: forward }) => {
        const r = run(tokenBucket, params, forward, 0);
        const admitted = r.decisions.reduce((a, d, i) => a + (d.allowed ? forward[i]!.cost : 0), 0);
        expect(admitted).toBeLessThanOrEqual(
          params.burst + (r.nowMs * params.rate) / params.periodMs + 1e-6,
        );
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
