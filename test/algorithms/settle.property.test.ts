import fc from 'fast-check';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import { leakyBucket, type LeakyBucketParams } from '../../src/algorithms/leaky-bucket.js';
import { slidingLog } from '../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { tokenBucket, type TokenBucketParams } from '../../src/algorithms/token-bucket.js';
import type { WindowParams } from '../../src/algorithms/fixed-window.js';
import { describeSettleInvariants } from './settle-invariants.js';

const burstParams: fc.Arbitrary<TokenBucketParams> = fc.record({
  rate: fc.oneof(
    fc.integer({ min: 1, max: 1_000 }),
    fc.double({ min: 0.01, max: 100, noNaN: true }),
  ),
  periodMs: fc.constantFrom(10, 1_000, 60_000),
  burst: fc.integer({ min: 1, max: 200 }),
});

const leakyParams: fc.Arbitrary<LeakyBucketParams> = fc.record({
  rate: fc.oneof(
    fc.integer({ min: 1, max: 1_000 }),
    fc.double({ min: 0.01, max: 100, noNaN: true }),
  ),
  periodMs: fc.constantFrom(10, 1_000, 60_000),
  capacity: fc.integer({ min: 1, max: 200 }),
  mode: fc.constantFrom('reject' as const, 'delay' as const),
});

const windowParams: fc.Arbitrary<WindowParams> = fc.record({
  limit: fc.integer({ min: 1, max: 100 }),
  windowMs: fc.constantFrom(10, 1_000, 60_000),
});

describeSettleInvariants(tokenBucket, burstParams, (p) => p.periodMs);
describeSettleInvariants(gcra, burstParams, (p) => p.periodMs);
describeSettleInvariants(leakyBucket, leakyParams, (p) => p.periodMs);
describeSettleInvariants(fixedWindow, windowParams, (p) => p.windowMs);
describeSettleInvariants(slidingLog, windowParams, (p) => p.windowMs);
// Its charge is whole units against a fractional estimate: the debt is within one unit.
describeSettleInvariants(slidingWindowCounter, windowParams, (p) => p.windowMs, 1);
