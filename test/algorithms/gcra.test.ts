/**
 * Known answers for GCRA: rows [nowMs, cost, allowed, remaining, retryAfterMs] replayed
 * in order on one key, each derived by hand in its comment. The payments rows are the
 * token bucket's (token-bucket.test.ts), as GCRA is the same limiter; only the backwards
 * time row differs. Invariants over generated runs live in gcra.property.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { gcra } from '../../src/algorithms/gcra.js';
import {
  expectInvalidPolicy,
  hour,
  itRejectsParams,
  replay,
  t0,
  type Row,
} from './known-answers.js';
/** The payments example: 100 units per second, bursts of 20; transfers cost 5, lookups 1. */
const payments = gcra.paramsSchema.parse({ rate: 100, period: '1s', burst: 20 });

describe('gcra: known answers', () => {
  it('payments: emission interval T = 1000ms/100 = 10ms, tolerance 20*T = 200ms', () => {
    // Instants and TATs below are relative to t0; free = burst - (TAT - now)/T.
    const rows: Row[] = [
      // t=0: fresh, TAT = now; new TAT = 0+5*10 = 50ms <= now+200ms; free 20-50/10 = 15
      [t0, 5, true, 15, 0],
      // t=0: TAT 50 -> 100ms; free 20-100/10 = 10
      [t0, 5, true, 10, 0],
      // t=0: TAT 100 -> 150ms; free 5
      [t0, 5, true, 5, 0],
      // t=0: TAT 150 -> 200ms = now+tolerance exactly: admitted, free 0
      [t0, 5, true, 0, 0],
      // t=0: new TAT 210ms overshoots the tolerance by 10ms = retry-after
      [t0, 1, false, 0, 10],
      // t=10ms: TAT 200 is 190ms ahead: free 20-19 = 1; new TAT 250 - 10 - 200 = 40ms over
      [t0 + 10, 5, false, 1, 40],
      // t=50ms: TAT still 200 (denials add nothing), 150ms ahead; new TAT 250 = 50+200: fits
      [t0 + 50, 5, true, 0, 0],
      // t=55ms: TAT 250 is 195ms ahead: free 0.5; new TAT 260 is 5ms over
      [t0 + 55, 1, false, 0.5, 5],
      // t=60ms: TAT 250 is 190ms ahead; new TAT 260 = 60+200: fits, free 0
      [t0 + 60, 1, true, 0, 0],
      // t=60ms: a peek (cost 0) leaves the TAT at 260ms
      [t0 + 60, 0, true, 0, 0],
      // t=1h: TAT 260ms is long past: TAT = now, free 20 (never more)
      [t0 + hour, 0, true, 20, 0],
      // t=1h: the whole burst: TAT = 1h+200ms, free 0
      [t0 + hour, 20, true, 0, 0],
      // t=1h-1s, time went back: the TAT stays at 1h+200ms, 1200ms ahead of this earlier
      // now (free max(0, 20-120) = 0); new TAT 1h+210ms - 200ms - (1h-1s) = 1010ms over.
      // Stricter than the token bucket (10ms), which remembers the latest instant.
      [t0 + hour - 1_000, 1, false, 0, 1_010],
      // t=1h-1s: a peek (cost 0) only reads, so it is admitted although the TAT is beyond
      // the tolerance from this earlier now; it leaves the TAT at 1h+200ms
      [t0 + hour - 1_000, 0, true, 0, 0],
      // t=1h+10ms: TAT 1h+200ms (unchanged by the denial); new TAT 1h+210ms fits exactly
      [t0 + hour + 10, 1, true, 0, 0],
    ];
    expect(replay(gcra, payments, rows)).toEqual(rows);
  });

  it('keeps fractional capacity: rate 3 per 1000ms (T = 333.33…ms, tolerance 1000ms)', () => {
    const p = gcra.paramsSchema.parse({ rate: 3, period: 1_000 });
    const rows: Row[] = [
      // t=0: burst defaults to ceil(3) = 3; TAT = 0 + 3*T = 1000ms, free 0
      [t0, 3, true, 0, 0],
      // t=1ms: TAT 999ms ahead: free 3 - 999*3/1000 = 0.003; new TAT 1333.33… is
      // 332.33…ms (0.997*T) over the tolerance
      [t0 + 1, 1, false, expect.closeTo(0.003, 12), expect.closeTo(997 / 3, 9)],
      // t=2ms: 998ms ahead: free 3 - 2.994 = 0.006
      [t0 + 2, 0, true, expect.closeTo(0.006, 12), 0],
      // t=334ms: 666ms ahead: free 1.002; admitted, TAT 1333.33…ms, free 0.002
      [t0 + 334, 1, true, expect.closeTo(0.002, 12), 0],
    ];
    expect(replay(gcra, p, rows)).toEqual(rows);
  });

  it('admits a whole burst at an epoch-ms instant although the TAT rounds (rate 7 per 1s)', () => {
    // T = 142.857…ms. Near t0 doubles are 2^-12ms apart, so each stored TAT is rounded
    // and 7 rounded additions can overshoot 7*T = 1000ms by ~2e-4ms; the 7th unit must
    // still fit (see slackMs in gcra.ts). Hence retry-after is only exact to 1e-3ms.
    const p = gcra.paramsSchema.parse({ rate: 7 });
    const rows: Row[] = [
      ...[6, 5, 4, 3, 2, 1, 0].map((free): Row => [t0, 1, true, expect.closeTo(free, 5), 0]),
      // t=0: TAT ~ 1000ms ahead; one more unit is T over the tolerance
      [t0, 1, false, 0, expect.closeTo(1000 / 7, 3)],
    ];
    expect(replay(gcra, p, rows)).toEqual(rows);
  });

  it('a cost above the burst is INVALID_POLICY and changes nothing', () => {
    // t=0: TAT 50ms ahead, free 15; a cost of 21 can never fit a burst of 20. Full again
    // when the TAT is reached: 50 ms.
    const { state, t } = expectInvalidPolicy(gcra, payments, t0, {
      firstCost: 5,
      cost: 21,
      limit: 20,
      remaining: 15,
      resetAfterMs: 50,
    });
    expect(t.state).toEqual(state);
  });

  it('uses the token bucket parameters and defaults', () => {
    expect(gcra.paramsSchema.parse({ rate: 100 })).toEqual({
      rate: 100,
      periodMs: 1_000,
      burst: 100,
    });
    // ttl: a full tolerance, 20*10ms
    expect(gcra.ttlMs(payments)).toBe(200);
    expect(gcra.capacity(payments)).toBe(20);
  });

  itRejectsParams(gcra.paramsSchema, [
    ['negative rate', { rate: -1 }, 'rate'],
    ['burst 0', { rate: 100, burst: 0 }, 'burst'],
    ['bad duration', { rate: 100, period: '5 parsecs' }, 'period'],
    ['unknown field', { rate: 100, brust: 20 }, 'brust'],
  ]);
});
