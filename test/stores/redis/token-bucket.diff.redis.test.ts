import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import { describeDifferential } from './differential.js';
import { burstParamsArb } from './diff-helpers.js';

// ttlMs = burst * periodMs / rate >= 2000ms (see describeDifferential)
const paramsArb = burstParamsArb(tokenBucket);

describeDifferential(tokenBucket, paramsArb, (p) => p.periodMs);
