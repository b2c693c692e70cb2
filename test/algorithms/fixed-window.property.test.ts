import { describe, expect, it } from 'vitest';
import { fixedWindow, type FixedWindowState } from '../../src/algorithms/fixed-window.js';
import {
  checkAtMostLimitPerFixedWindow,
  checkExactRetryAfter,
  describeWindowInvariants,
  ulps,
} from './window-properties.js';

describeWindowInvariants(fixedWindow);

describe('fixed-window: specific properties', () => {
  it('admits at most limit per window, also when time moves backwards', () => {
    checkAtMostLimitPerFixedWindow(fixedWindow);
  });

  it('retry-after is exact: asking at nowMs + retryAfterMs (+1e-6 ms) admits, a moment earlier does not', () => {
    // 1e-6 ms earlier, or a few ulps at clock scale where 1e-6 ms is below the spacing.
    checkExactRetryAfter(fixedWindow, 1e-6, (_params, nowMs) => 1e-6 + 16 * ulps(nowMs));
  });

  it('lets 2x limit through across a boundary: 100 at t=999ms and 100 at t=1000ms (limit 100/1s)', () => {
    const params = fixedWindow.paramsSchema.parse({ limit: 100, window: '1s' });
    let state: FixedWindowState | undefined;
    let admitted = 0;
    for (const nowMs of [999, 1_000]) {
      for (let i = 0; i < 100; i++) {
        const t = fixedWindow.transition(state, nowMs, 1, params);
        state = t.state;
        if (t.decision.allowed) admitted++;
      }
    }
    // Window 0 = [0, 1000) takes 100 at 999; window 1 starts empty at 1000 and takes 100.
    expect(admitted).toBe(200);
  });
});
