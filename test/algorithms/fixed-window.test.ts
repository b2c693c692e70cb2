/**
 * Known answers for the fixed window, as rows [nowMs, cost, allowed, remaining,
 * retryAfterMs] over named instants (STYLE.md §6.2). Rows run in order on one state;
 * each comment derives its expectation by hand. Window w is [w * windowMs, (w + 1) * windowMs).
 */
import { describe, expect, it } from 'vitest';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { itRejectsParams, play } from './known-answers.js';

describe('fixed-window: known answers', () => {
  it('limit 10 / window 1000ms, costs 5 and 1', () => {
    const params = fixedWindow.paramsSchema.parse({ limit: 10, window: 1_000 });
    const t0 = 5_000; // window 5 starts: [5000, 6000)
    const t1 = 5_400; // mid window 5
    const t2 = 5_999; // last ms of window 5
    const t3 = 6_000; // window 6 starts: t2 + the retry-after given at t2
    const t4 = 5_500; // backwards, into window 5
    const t5 = 8_250; // window 8: two windows after 6
    play(fixedWindow, params, [
      // fresh: window 5, count 0; 0 + 5 <= 10 admitted; 10 - 5 = 5 left
      [t0, 5, true, 5, 0],
      // 5 + 5 = 10 <= 10 admitted; nothing left
      [t1, 5, true, 0, 0],
      // exhausted: 10 + 1 > 10 denied; window 5 ends at 6000, 6000 - 5400 = 600
      [t1, 1, false, 0, 600],
      // cost 0 peeks: 10 + 0 <= 10 admitted, consumes nothing
      [t1, 0, true, 0, 0],
      // still window 5 (floor(5999 / 1000) = 5): 6000 - 5999 = 1
      [t2, 1, false, 0, 1],
      // exact retry-after: at 5999 + 1 window 6 starts empty; 0 + 1 <= 10; 9 left
      [t3, 1, true, 9, 0],
      // backwards into window 5: read as window 6, count 1 kept (window 5's spent 10 is not
      // reopened, window 6's 1 is not forgotten); 1 + 1 <= 10; 8 left
      [t4, 1, true, 8, 0],
      // backwards, denied: 2 + 9 > 10; the effective window 6 ends at 7000: 7000 - 5500 = 1500
      [t4, 9, false, 8, 1_500],
      // window roll over an idle window: 8 > 6, count resets; 0 + 10 <= 10; 0 left
      [t5, 10, true, 0, 0],
      // cost above the limit can never fit: INVALID_POLICY, state unchanged (count 10)
      [t5, 11, false, 0, 0],
      // still window 8, count 10: denied until 9000, 9000 - 8250 = 750
      [t5, 1, false, 0, 750],
    ]);
  });

  it('limit 100 / window 1s: the boundary lets 2x through', () => {
    const params = fixedWindow.paramsSchema.parse({ limit: 100, window: '1s' });
    const t0 = 999; // last ms of window 0
    const t1 = 1_000; // window 1 starts
    play(fixedWindow, params, [
      // fresh window 0: 0 + 100 <= 100 admitted; 0 left
      [t0, 100, true, 0, 0],
      // 100 + 1 > 100 denied; window 0 ends at 1000: 1 ms
      [t0, 1, false, 0, 1],
      // window 1 starts empty: another 100 admitted 1 ms after the first 100
      [t1, 100, true, 0, 0],
      // 100 + 1 > 100 denied until 2000: 1000 ms
      [t1, 1, false, 0, 1_000],
    ]);
  });

  it('limit 10 / window 1000ms charging denied requests (envoyproxy/ratelimit counting)', () => {
    const params = fixedWindow.chargingDenied!(
      fixedWindow.paramsSchema.parse({ limit: 10, window: 1_000 }),
    );
    expect(fixedWindow.chargesDenied!(params)).toBe(true);
    const t0 = 5_000; // window 5 starts: [5000, 6000)
    const t1 = 5_400; // mid window 5
    const t2 = 6_000; // window 6 starts
    const state = play(fixedWindow, params, [
      // fresh: 0 + 8 <= 10 admitted; 2 left
      [t0, 8, true, 2, 0],
      // 8 + 5 > 10 denied, and charged: count 13; it found 2 left; window 5 ends in 1000
      [t0, 5, false, 2, 1_000],
      // 13 + 0 > 10: even a peek is over now (upstream's INCRBY 0 reads 13 > 10); 0 found
      [t1, 0, false, 0, 600],
      // 13 + 1 > 10 denied, charged
      [t1, 1, false, 0, 600],
    ]);
    expect(state).toEqual({ window: 5, count: 14 });
    // window 6 starts empty: 11 > 10 can never fit: OVER_LIMIT (not INVALID_POLICY), retry
    // never, charged: count 11, so the window stays over
    const big = fixedWindow.transition(state, t2, 11, params);
    expect(big.decision).toEqual({
      status: 'OVER_LIMIT',
      allowed: false,
      limit: 10,
      remaining: 10,
      retryAfterMs: Infinity,
      resetAfterMs: 1_000,
    });
    expect(big.state).toEqual({ window: 6, count: 11 });
    expect(fixedWindow.transition(big.state, t2, 1, params).decision).toMatchObject({
      status: 'OVER_LIMIT',
      remaining: 0,
      retryAfterMs: 1_000,
    });
    expect(
      fixedWindow.chargesDenied!(fixedWindow.paramsSchema.parse({ limit: 1, window: 1 })),
    ).toBe(false);
  });

  it('resetAfterMs is the time to the window end while the count is above 0', () => {
    const params = fixedWindow.paramsSchema.parse({ limit: 10, window: 1_000 });
    // fresh peek: count 0, already full
    expect(fixedWindow.transition(undefined, 5_400, 0, params).decision.resetAfterMs).toBe(0);
    // count 3 in window 5: full again at 6000, 600 ms after 5400
    const t = fixedWindow.transition(undefined, 5_400, 3, params);
    expect(t.decision.resetAfterMs).toBe(600);
    // a denial (3 + 8 > 10) keeps the count: still full again at 6000, 500 ms after 5500
    const denied = fixedWindow.transition(t.state, 5_500, 8, params).decision;
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 500, resetAfterMs: 500 });
    expect(fixedWindow.ttlMs(params)).toBe(1_000);
    expect(fixedWindow.capacity(params)).toBe(10);
  });

  it('charging denials: a denied cost equal to the limit fits the next window', () => {
    const params = fixedWindow.chargingDenied!(
      fixedWindow.paramsSchema.parse({ limit: 10, window: 1_000 }),
    );
    // count 1 in window 5: 1 + 10 > 10 denied (charged); the next window starts empty and
    // holds 10: retry at 6000, 600 ms after 5400 (not never, as for a cost above 10)
    const { state } = fixedWindow.transition(undefined, 5_400, 1, params);
    expect(fixedWindow.transition(state, 5_400, 10, params).decision).toMatchObject({
      allowed: false,
      retryAfterMs: 600,
    });
  });
});

describe('fixed-window: params', () => {
  const parse = (input: unknown) => fixedWindow.paramsSchema.safeParse(input);

  it('accepts ms numbers and duration strings', () => {
    expect(parse({ limit: 100, window: '1s' })).toEqual({
      success: true,
      data: { limit: 100, windowMs: 1_000 },
    });
    expect(parse({ limit: 1, window: 250 })).toEqual({
      success: true,
      data: { limit: 1, windowMs: 250 },
    });
  });

  itRejectsParams(fixedWindow.paramsSchema, [
    ['limit 0', { limit: 0, window: '1s' }, '>=1\n  → at limit'],
    ['limit 1.5', { limit: 1.5, window: '1s' }, 'expected int, received number\n  → at limit'],
    ['window "5 parsecs"', { limit: 10, window: '5 parsecs' }, 'got "5 parsecs"\n  → at window'],
    ['missing window', { limit: 10 }, '→ at window'],
    ['unknown field', { limit: 10, window: '1s', burst: 5 }, 'Unrecognized key: "burst"'],
  ]);
});
