/**
 * Known answers for the sliding window counter, as rows [nowMs, cost, allowed,
 * remaining, retryAfterMs] over named instants (STYLE.md §6.2). Rows run in order on
 * one state; each comment derives its expectation by hand, writing the state as
 * w<window> prev/cur and f for the fraction of window w elapsed:
 * estimate = prev * (1 - f) + cur, admitted iff estimate + cost <= limit.
 */
import { describe, expect, it } from 'vitest';
import { slidingWindowCounter as swc } from '../../src/algorithms/sliding-window-counter.js';
import { itRejectsParams, play } from './known-answers.js';

describe('sliding-window-counter: known answers', () => {
  it('limit 10 / window 1000ms, costs 5, 2 and 1', () => {
    const params = swc.paramsSchema.parse({ limit: 10, window: 1_000 });
    const t0 = 10_000; // window 10 starts: [10000, 11000)
    const t1 = 10_500; // f = 0.5 in window 10
    const t2 = 11_250; // window 11, f = 0.25
    const t3 = 11_500; // f = 0.5: t2 + the retry-after given at t2
    const t4 = 11_750; // f = 0.75
    const t5 = 10_900; // backwards, into window 10
    const t6 = 11_800; // f = 0.8: t4 + the retry-after given at t4
    const t7 = 12_250; // window 12, f = 0.25
    const t8 = 14_000; // window 14: two windows after 12
    const final = play(
      swc,
      params,
      [
        // fresh: w10 0/0, estimate 0; 0 + 5 <= 10 admitted; cur 5; 10 - 5 = 5 left
        [t0, 5, true, 5, 0],
        // w10 0/5, f 0.5: estimate 5; 5 + 5 <= 10 admitted; cur 10; 0 left
        [t1, 5, true, 0, 0],
        // estimate 10, 10 + 5 > 10. cur + cost = 15 > 10: no fit in window 10; in window 11
        // prev = 10 decays and needs 1 - (10 - 5) / 10 = 0.5 of it: 11500 - 10500 = 1000
        [t1, 5, false, 0, 1_000],
        // cost 0 peeks: 10 + 0 <= 10, consumes nothing
        [t1, 0, true, 0, 0],
        // window roll: w11 10/0, f 0.25: estimate 10 * 0.75 = 7.5; 7.5 + 5 > 10 denied;
        // 10 - 7.5 = 2.5 left. Fits at f = 1 - (10 - 0 - 5) / 10 = 0.5: 11500 - 11250 = 250
        [t2, 5, false, 2.5, 250],
        // exact retry-after: f 0.5, estimate 5; 5 + 5 <= 10 admitted; cur 5; 0 left
        [t3, 5, true, 0, 0],
        // w11 10/5, f 0.75: estimate 2.5 + 5 = 7.5; 7.5 + 1 <= 10; cur 6; 10 - 8.5 = 1.5 left
        [t4, 1, true, 1.5, 0],
        // estimate 2.5 + 6 = 8.5; 8.5 + 2 > 10 denied; 1.5 left. Fits at
        // f = 1 - (10 - 6 - 2) / 10 = 0.8: 11800 - 11750 = 50
        [t4, 2, false, 1.5, 50],
        // backwards into window 10: read as w11 with f 0 (prev at full weight): estimate
        // 10 + 6 = 16 > 10, 0 left (not more); still fits at 11800: 11800 - 10900 = 900
        [t5, 2, false, 0, 900],
        // exact retry-after: f 0.8, estimate 10 * 0.2 + 6 = 8; 8 + 2 <= 10; cur 8; 0 left
        [t6, 2, true, 0, 0],
        // window roll: w12 8/0, f 0.25: estimate 8 * 0.75 = 6; 6 + 1 <= 10; cur 1; 3 left
        [t7, 1, true, 3, 0],
        // two windows later both counts are gone: w14 0/0; 0 + 10 <= 10; cur 10; 0 left
        [t8, 10, true, 0, 0],
        // cost above the limit can never fit: INVALID_POLICY, state unchanged
        [t8, 11, false, 0, 0],
        // cost = limit needs the estimate at 0: cur 10 must fully decay through window 15,
        // f = 1 - (10 - 10) / 10 = 1 in window 15, i.e. 16000: 16000 - 14000 = 2000
        [t8, 10, false, 0, 2_000],
      ],
      { close: true },
    );
    expect(final).toEqual({ window: 14, current: 10, previous: 0 });
  });

  it('limit 100 / window 1s: smooth across the boundary', () => {
    const params = swc.paramsSchema.parse({ limit: 100, window: '1s' });
    play(
      swc,
      params,
      [
        // fresh: w0 0/0; 100 <= 100 admitted at 999; 0 left
        [999, 100, true, 0, 0],
        // w1 100/0, f 0: estimate 100, no 2x burst. Fits at f = 1 - (100 - 0 - 1) / 100 =
        // 0.01: 1010 - 1000 = 10
        [1_000, 1, false, 0, 10],
        // exact retry-after: f 0.01, estimate 99; 99 + 1 <= 100; cur 1; 0 left
        [1_010, 1, true, 0, 0],
        // f 0.5: estimate 50 + 1 = 51; 51 + 49 <= 100; cur 50; 0 left
        [1_500, 49, true, 0, 0],
      ],
      { close: true },
    );
  });

  it('resetAfterMs is the time until the estimate reaches 0', () => {
    const params = swc.paramsSchema.parse({ limit: 10, window: 1_000 });
    // fresh: already full
    expect(swc.transition(undefined, 10_500, 0, params).decision.resetAfterMs).toBe(0);
    // w10 0/10: cur decays through window 11, gone at 12000: 12000 - 10500 = 1500
    const a = swc.transition(undefined, 10_500, 10, params);
    expect(a.decision.resetAfterMs).toBe(1_500);
    // w11 10/0: prev gone at the end of window 11: 12000 - 11250 = 750
    expect(swc.transition(a.state, 11_250, 0, params).decision.resetAfterMs).toBe(750);
    expect(swc.ttlMs(params)).toBe(2_000);
  });

  it('reports a cost above the limit as INVALID_POLICY with the remaining capacity', () => {
    const params = swc.paramsSchema.parse({ limit: 10, window: 1_000 });
    // w10 0/4: estimate 4; a cost of 11 can never fit; 10 - 4 = 6 left, unchanged. The 4
    // in window 10 count until window 11 has passed: reset at 12000, 2000 ms.
    const { state } = swc.transition(undefined, 10_000, 4, params);
    const t = swc.transition(state, 10_000, 11, params);
    expect(t.decision).toEqual({
      status: 'INVALID_POLICY',
      allowed: false,
      limit: 10,
      remaining: 6,
      retryAfterMs: 0,
      resetAfterMs: 2_000,
    });
    expect(t.state).toEqual(state);
  });

  it('gives whole-ms retry-afters exactly at epoch-ms instants', () => {
    // The same requests as the first table, 1.7e12 ms later (window-aligned): waits are
    // whole ms there too, so they must come out exact, not a few ulps of the instant over.
    const params = swc.paramsSchema.parse({ limit: 10, window: 1_000 });
    const at = 1_700_000_000_000;
    const step = (s: unknown, nowMs: number, cost: number) =>
      swc.transition(s as never, at + nowMs, cost, params);
    const a = step(undefined, 10_000, 5);
    const b = step(a.state, 10_500, 5);
    // w10 0/10: cur + cost = 15 > 10, fits at 11500: 1000 ms after 10500
    expect(step(b.state, 10_500, 5).decision.retryAfterMs).toBe(1_000);
    // w11 10/0, f 0.25: fits at f 0.5: 250 ms
    expect(step(b.state, 11_250, 5).decision.retryAfterMs).toBe(250);
    // and asking again then admits
    expect(step(b.state, 11_500, 5).decision.allowed).toBe(true);
  });
});

describe('sliding-window-counter: params', () => {
  const parse = (input: unknown) => swc.paramsSchema.safeParse(input);

  it('accepts ms numbers and duration strings', () => {
    expect(parse({ limit: 10, window: '1h' })).toEqual({
      success: true,
      data: { limit: 10, windowMs: 3_600_000 },
    });
  });

  itRejectsParams(swc.paramsSchema, [
    ['limit 0', { limit: 0, window: '1s' }, '>=1\n  → at limit'],
    ['limit 1.5', { limit: 1.5, window: '1s' }, 'expected int, received number\n  → at limit'],
    ['window "5 parsecs"', { limit: 10, window: '5 parsecs' }, 'got "5 parsecs"\n  → at window'],
    ['unknown field', { limit: 10, window: '1s', precision: 2 }, 'Unrecognized key: "precision"'],
  ]);
});
