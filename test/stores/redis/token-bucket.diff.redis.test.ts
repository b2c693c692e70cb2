import fc from 'fast-check';
import { tokenBucket, type TokenBucketParams } from '../../../src/algorithms/token-bucket.js';
import { describeDifferential } from './differential.js';

// ttlMs = burst * periodMs / rate >= 2000ms (see describeDifferential)
const paramsArb: fc.Arbitrary<TokenBucketParams> = fc
  .record({
    rate: fc.oneof(
      fc.integer({ min: 1, max: 1_000 }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
    ),
    periodMs: fc.constantFrom(1_000, 60_000, 3_600_000),
    burst: fc.integer({ min: 1, max: 500 }),
  })
  .filter((p) => tokenBucket.ttlMs(p) >= 2_000);

describeDifferential(tokenBucket, paramsArb, (p) => p.periodMs);
