import { describe, it } from 'vitest';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import {
  checkAtMostLimitPerFixedWindow,
  checkExactRetryAfter,
  describeWindowInvariants,
  ulps,
} from './window-properties.js';

const alg = slidingWindowCounter;

describeWindowInvariants(alg);

describe('sliding-window-counter: specific properties', () => {
  it('admits at most limit within any one fixed window, also when time moves backwards', () => {
    checkAtMostLimitPerFixedWindow(alg);
  });

  it('retry-after is exact: asking at exactly nowMs + retryAfterMs admits, a moment earlier does not', () => {
    // Exactly at the instant (no margin after it). The estimate falls >= 1 unit per window,
    // so 1e-6 of a window earlier it is >= 1e-6 units too high (far above FIT_EPSILON); plus
    // a few ulps of the instant, which is all the rounding margin retry-after may add.
    checkExactRetryAfter(alg, 0, (params, nowMs) => 1e-6 * params.windowMs + 16 * ulps(nowMs));
  });
});
