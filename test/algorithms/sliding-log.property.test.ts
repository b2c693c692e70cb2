import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { slidingLog, type SlidingLogState } from '../../src/algorithms/sliding-log.js';
import { forwardSteps, NUM_RUNS, run } from './invariants.js';
import {
  checkExactRetryAfter,
  describeWindowInvariants,
  ulps,
  windowScenario,
} from './window-properties.js';

describeWindowInvariants(slidingLog);

describe('sliding-log: specific properties', () => {
  it('exact rolling limit: for each admitted request at t, admitted cost in (t - window, t] <= limit', () => {
    fc.assert(
      fc.property(windowScenario(80), ({ params, steps }) => {
        const forward = forwardSteps(steps);
        const r = run(slidingLog, params, forward, 0);
        const admitted: { tMs: number; cost: number }[] = [];
        let nowMs = 0;
        forward.forEach((s, i) => {
          nowMs += s.dtMs;
          if (r.decisions[i]!.allowed) admitted.push({ tMs: nowMs, cost: s.cost });
        });
        for (const { tMs } of admitted) {
          // `u.tMs + windowMs > tMs` rather than `u.tMs > tMs - windowMs`: the same double
          // arithmetic as the algorithm's expiry, so float rounding cannot disagree.
          const inWindow = admitted.filter((u) => u.tMs <= tMs && u.tMs + params.windowMs > tMs);
          expect(inWindow.reduce((sum, u) => sum + u.cost, 0)).toBeLessThanOrEqual(params.limit);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it('retry-after is exact: asking at nowMs + retryAfterMs (+1e-6 ms) admits, a moment earlier does not', () => {
    // 1e-6 ms earlier, or a few ulps at clock scale where 1e-6 ms is below the spacing.
    checkExactRetryAfter(slidingLog, 1e-6, (_params, nowMs) => 1e-6 + 16 * ulps(nowMs));
  });

  it('the log stays sorted by time and never holds more than limit entries', () => {
    fc.assert(
      fc.property(windowScenario(80), ({ params, steps }) => {
        let state: SlidingLogState | undefined;
        let nowMs = 1_000_000;
        for (const s of steps) {
          nowMs += s.dtMs;
          state = slidingLog.transition(state, nowMs, s.cost, params).state;
          expect(state.entries.length).toBeLessThanOrEqual(params.limit);
          state.entries.forEach(([tMs], i) => {
            if (i > 0) expect(tMs).toBeGreaterThanOrEqual(state!.entries[i - 1]![0]);
          });
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
