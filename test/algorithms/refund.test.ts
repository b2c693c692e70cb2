/**
 * Known answers for `refundState`, the give-back of a cross-slot check whose later slot
 * denied: per algorithm, a state, a refund and the state to write, each derived by hand.
 * refund.diff.redis.test.ts checks that the Lua refund agrees with this one.
 */
import { describe, expect, it } from 'vitest';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { gcra } from '../../src/algorithms/gcra.js';
import { leakyBucket } from '../../src/algorithms/leaky-bucket.js';
import { refundState } from '../../src/algorithms/refund.js';
import { slidingLog } from '../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import { t0 } from './known-answers.js';

describe('refundState', () => {
  it('writes nothing without a state or for a cost of 0', () => {
    const p = tokenBucket.paramsSchema.parse({ rate: 100, burst: 20 });
    expect(refundState('token-bucket', undefined, t0, t0, 5, p)).toBeUndefined();
    expect(refundState('token-bucket', { tokens: 3, tsMs: t0 }, t0, t0, 0, p)).toBeUndefined();
  });

  it('token bucket: refills to now, then gives the cost back, never above the burst', () => {
    // 100 per 1s: 1 token per 10ms, burst 20
    const p = tokenBucket.paramsSchema.parse({ rate: 100, burst: 20 });
    // 0 tokens at t0; at t0+10ms 1 token refilled, + 5 given back = 6, as of t0+10ms
    expect(refundState('token-bucket', { tokens: 0, tsMs: t0 }, t0 + 10, t0, 5, p)).toEqual({
      tokens: 6,
      tsMs: t0 + 10,
    });
    // 18 + 5 = 23, capped at the burst: 20
    expect(refundState('token-bucket', { tokens: 18, tsMs: t0 }, t0, t0, 5, p)).toEqual({
      tokens: 20,
      tsMs: t0,
    });
    // 16 + 20ms refill (2) = 18, + 1 = 19: under the burst, so nothing is clipped
    expect(refundState('token-bucket', { tokens: 16, tsMs: t0 }, t0 + 20, t0, 1, p)).toEqual({
      tokens: 19,
      tsMs: t0 + 20,
    });
    // now before the state's instant (time went back): no refill, the later instant kept
    expect(refundState('token-bucket', { tokens: 3, tsMs: t0 + 100 }, t0, t0, 5, p)).toEqual({
      tokens: 8,
      tsMs: t0 + 100,
    });
    // a refill of 100ms (10 tokens) at 2 per 1s would be 0.2: the rate and period are used
    const slow = tokenBucket.paramsSchema.parse({ rate: 2, burst: 20 });
    expect(refundState('token-bucket', { tokens: 0, tsMs: t0 }, t0 + 100, t0, 1, slow)).toEqual({
      tokens: 1.2,
      tsMs: t0 + 100,
    });
  });

  it('GCRA: moves the TAT back by cost × T, never before now', () => {
    // T = 1000ms / 100 = 10ms
    const p = gcra.paramsSchema.parse({ rate: 100, burst: 20 });
    // TAT 200ms ahead; giving back 5 units moves it 50ms back
    expect(refundState('gcra', { tatMs: t0 + 200 }, t0, t0, 5, p)).toEqual({ tatMs: t0 + 150 });
    // TAT 30ms ahead: 50ms back would pass now, so it stops at now (full)
    expect(refundState('gcra', { tatMs: t0 + 30 }, t0, t0, 5, p)).toEqual({ tatMs: t0 });
  });

  it('leaky bucket: leaks to now, then takes the cost out, never below 0', () => {
    // 100 per 1s: 1 unit leaks per 10ms, capacity 20
    const p = leakyBucket.paramsSchema.parse({ rate: 100, capacity: 20 });
    // level 20 at t0; at t0+10ms 1 leaked (19), - 5 = 14, as of t0+10ms
    expect(refundState('leaky-bucket', { level: 20, tsMs: t0 }, t0 + 10, t0, 5, p)).toEqual({
      level: 14,
      tsMs: t0 + 10,
    });
    // 3 - 5 floors at 0
    expect(refundState('leaky-bucket', { level: 3, tsMs: t0 }, t0, t0, 5, p)).toEqual({
      level: 0,
      tsMs: t0,
    });
    // level 12, 30ms leak = 3 units: 9 - 4 = 5
    expect(refundState('leaky-bucket', { level: 12, tsMs: t0 }, t0 + 30, t0, 4, p)).toEqual({
      level: 5,
      tsMs: t0 + 30,
    });
    // time went back: no leak, the later instant kept
    expect(refundState('leaky-bucket', { level: 10, tsMs: t0 + 100 }, t0, t0, 5, p)).toEqual({
      level: 5,
      tsMs: t0 + 100,
    });
  });

  it("fixed window: takes the cost off the count only while the state is the consume's window", () => {
    const p = fixedWindow.paramsSchema.parse({ limit: 10, window: 1_000 });
    // window 5 = [5000, 6000): consumed at 5400, count 7 → 2
    expect(refundState('fixed-window', { window: 5, count: 7 }, 5_500, 5_400, 5, p)).toEqual({
      window: 5,
      count: 2,
    });
    // floors at 0
    expect(refundState('fixed-window', { window: 5, count: 3 }, 5_500, 5_400, 5, p)).toEqual({
      window: 5,
      count: 0,
    });
    // the state moved to window 6: window 5's units are no longer counted, nothing to write
    expect(
      refundState('fixed-window', { window: 6, count: 7 }, 6_100, 5_400, 5, p),
    ).toBeUndefined();
  });

  it('sliding window counter: current in the same window, previous one window on, then nothing', () => {
    const p = slidingWindowCounter.paramsSchema.parse({ limit: 10, window: 1_000 });
    const s = { window: 5, current: 7, previous: 4 };
    // consumed at 5400, in window 5: current 7 - 5 = 2
    expect(refundState('sliding-window-counter', s, 5_500, 5_400, 5, p)).toEqual({
      window: 5,
      current: 2,
      previous: 4,
    });
    // consumed at 4400, in window 4, now counted as previous: 4 - 3 = 1
    expect(refundState('sliding-window-counter', s, 5_500, 4_400, 3, p)).toEqual({
      window: 5,
      current: 7,
      previous: 1,
    });
    // both floor at 0
    expect(refundState('sliding-window-counter', s, 5_500, 5_400, 9, p)).toEqual({
      window: 5,
      current: 0,
      previous: 4,
    });
    expect(refundState('sliding-window-counter', s, 5_500, 4_400, 9, p)).toEqual({
      window: 5,
      current: 7,
      previous: 0,
    });
    // consumed in window 3: no longer counted
    expect(refundState('sliding-window-counter', s, 5_500, 3_400, 3, p)).toBeUndefined();
  });

  it('sliding log: removes the earliest entry of exactly that cost at or after the consume', () => {
    const p = slidingLog.paramsSchema.parse({ limit: 10, window: 1_000 });
    const entries = [
      [t0, 3],
      [t0 + 5, 3],
      [t0 + 9, 3],
      [t0 + 9, 1],
    ] as const;
    // consumed at t0+1: the entries of cost 3 from then are at t0+5 and t0+9; t0+5 goes
    expect(refundState('sliding-log', { entries }, t0 + 20, t0 + 1, 3, p)).toEqual({
      entries: [
        [t0, 3],
        [t0 + 9, 3],
        [t0 + 9, 1],
      ],
    });
    // consumed at t0 exactly: the entry stamped at t0 counts
    expect(refundState('sliding-log', { entries }, t0 + 20, t0, 3, p)).toEqual({
      entries: [
        [t0 + 5, 3],
        [t0 + 9, 3],
        [t0 + 9, 1],
      ],
    });
    // cost 1 from t0+1: only the last entry
    expect(refundState('sliding-log', { entries }, t0 + 20, t0 + 1, 1, p)).toEqual({
      entries: [
        [t0, 3],
        [t0 + 5, 3],
        [t0 + 9, 3],
      ],
    });
    // no entry of cost 2, and none of cost 3 after t0+9: nothing to write
    expect(refundState('sliding-log', { entries }, t0 + 20, t0, 2, p)).toBeUndefined();
    expect(refundState('sliding-log', { entries }, t0 + 20, t0 + 10, 3, p)).toBeUndefined();
  });

  it('never mutates the state it is given', () => {
    const tb = tokenBucket.paramsSchema.parse({ rate: 100, burst: 20 });
    const s = Object.freeze({ tokens: 1, tsMs: t0 });
    refundState('token-bucket', s, t0 + 10, t0, 1, tb);
    const log = Object.freeze({ entries: Object.freeze([Object.freeze([t0, 1] as const)]) });
    const p = slidingLog.paramsSchema.parse({ limit: 10, window: 1_000 });
    expect(refundState('sliding-log', log, t0, t0, 1, p)).toEqual({ entries: [] });
    expect(log.entries).toEqual([[t0, 1]]);
    expect(s).toEqual({ tokens: 1, tsMs: t0 });
  });
});
