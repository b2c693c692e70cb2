/**
 * Known answers for the sliding log, as rows [nowMs, cost, allowed, remaining,
 * retryAfterMs] over named instants (STYLE.md §6.2). Rows run in order on one state;
 * each comment derives its expectation by hand. An entry admitted at t counts while
 * nowMs < t + windowMs; the log is written as [(tMs, cost), ...].
 */
import { describe, expect, it } from 'vitest';
import { slidingLog } from '../../src/algorithms/sliding-log.js';
import { itRejectsParams, play } from './known-answers.js';

describe('sliding-log: known answers', () => {
  it('limit 10 / window 1000ms, costs 5 and 1', () => {
    const params = slidingLog.paramsSchema.parse({ limit: 10, window: 1_000 });
    const t0 = 10_000;
    const t1 = 10_400;
    const t2 = 10_500;
    const t3 = 10_999; // the last ms t0's entry counts
    const t4 = 11_000; // t0's entry expires: t3 + the retry-after given at t3
    const t5 = 10_800; // backwards, after t4
    const t6 = 11_400; // t1's entries expire
    const t7 = 11_900; // after t5 + window: would free t5's entry had it been stamped at t5
    const t8 = 12_000;
    const t9 = 12_400;
    const final = play(slidingLog, params, [
      // fresh: empty log, 0 + 5 <= 10 admitted; log [(10000,5)]; 5 left
      [t0, 5, true, 5, 0],
      // 5 + 1 <= 10; log [(10000,5),(10400,1)]; 4 left
      [t1, 1, true, 4, 0],
      // 6 + 4 <= 10; log [(10000,5),(10400,1),(10400,4)]; 0 left
      [t1, 4, true, 0, 0],
      // exhausted: 10 + 1 > 10. Freeing the oldest (5) makes room; it expires at
      // 10000 + 1000 = 11000: 11000 - 10500 = 500
      [t2, 1, false, 0, 500],
      // 10 + 6 > 10. Needs 6 freed: (10000,5) frees 5, not enough; (10400,1) makes 6,
      // expiring at 11400: 11400 - 10500 = 900
      [t2, 6, false, 0, 900],
      // cost 0 peeks: 10 + 0 <= 10 admitted, no entry added
      [t2, 0, true, 0, 0],
      // 10000 + 1000 > 10999: the entry still counts; 11000 - 10999 = 1
      [t3, 1, false, 0, 1],
      // exact retry-after: 10000 + 1000 <= 11000 expires (10000,5); 5 + 1 <= 10;
      // log [(10400,1),(10400,4),(11000,1)]; 4 left
      [t4, 1, true, 4, 0],
      // backwards to 10800: nothing expires (every entry is newer); 6 + 4 <= 10. Stamped at
      // 11000 (the newest entry), not 10800: log [(10400,1),(10400,4),(11000,1),(11000,4)]
      [t5, 4, true, 0, 0],
      // still backwards, full: the oldest (10400,1) expires at 11400: 11400 - 10800 = 600
      [t5, 1, false, 0, 600],
      // both 10400 entries expire (10400 + 1000 <= 11400): used 5; 5 + 1 <= 10; 4 left;
      // log [(11000,1),(11000,4),(11400,1)]
      [t6, 1, true, 4, 0],
      // 11900 >= 10800 + 1000, yet the entry admitted "at 10800" still counts (stamped
      // 11000): used 6, 6 + 5 > 10; freeing (11000,1) is enough: 12000 - 11900 = 100
      [t7, 5, false, 4, 100],
      // the 11000 entries expire: used 1 (11400,1); 1 + 10 > 10; it expires at 12400: 400
      [t8, 10, false, 9, 400],
      // exact retry-after: all expired, 0 + 10 <= 10; log [(12400,10)]; 0 left
      [t9, 10, true, 0, 0],
      // cost above the limit can never fit: INVALID_POLICY, log unchanged
      [t9, 11, false, 0, 0],
    ]);
    expect(final).toEqual({ entries: [[t9, 10]] });
  });

  it('limit 100 / window 1s: no boundary burst', () => {
    const params = slidingLog.paramsSchema.parse({ limit: 100, window: '1s' });
    play(slidingLog, params, [
      // fresh: 100 <= 100 admitted at 999; 0 left
      [999, 100, true, 0, 0],
      // 1000 is a new fixed window, but the 100 from 999 count until 1999: 1999 - 1000 = 999
      [1_000, 1, false, 0, 999],
      // 999 + 1000 > 1998: still counted, 1 ms to go
      [1_998, 1, false, 0, 1],
      // expired (999 + 1000 <= 1999): 100 fit again
      [1_999, 100, true, 0, 0],
    ]);
  });

  it('resetAfterMs is the time until the newest entry expires', () => {
    const params = slidingLog.paramsSchema.parse({ limit: 10, window: 1_000 });
    // empty log: already full
    expect(slidingLog.transition(undefined, 10_000, 0, params).decision.resetAfterMs).toBe(0);
    const a = slidingLog.transition(undefined, 10_000, 5, params);
    // newest (10000,5) expires at 11000
    expect(a.decision.resetAfterMs).toBe(1_000);
    // newest (10400,1) expires at 11400, 900 ms after 10500
    const b = slidingLog.transition(a.state, 10_400, 1, params);
    expect(slidingLog.transition(b.state, 10_500, 0, params).decision.resetAfterMs).toBe(900);
    expect(slidingLog.ttlMs(params)).toBe(1_000);
  });
});

describe('sliding-log: params', () => {
  const parse = (input: unknown) => slidingLog.paramsSchema.safeParse(input);

  it('accepts ms numbers and duration strings', () => {
    expect(parse({ limit: 10, window: '1m' })).toEqual({
      success: true,
      data: { limit: 10, windowMs: 60_000 },
    });
  });

  itRejectsParams(slidingLog.paramsSchema, [
    ['limit 0', { limit: 0, window: '1s' }, '>=1\n  → at limit'],
    ['limit 1.5', { limit: 1.5, window: '1s' }, 'expected int, received number\n  → at limit'],
    ['window "5 parsecs"', { limit: 10, window: '5 parsecs' }, 'got "5 parsecs"\n  → at window'],
    ['unknown field', { limit: 10, window: '1s', rate: 5 }, 'Unrecognized key: "rate"'],
  ]);
});
