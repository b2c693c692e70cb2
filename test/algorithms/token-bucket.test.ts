/**
 * Known answers for the token bucket: rows [nowMs, cost, allowed, remaining, retryAfterMs]
 * replayed in order on one bucket, each derived by hand in its comment. Invariants over
 * generated runs live in token-bucket.property.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import {
  expectInvalidPolicy,
  hour,
  itRejectsParams,
  replay,
  t0,
  type Row,
} from './known-answers.js';
/** The payments example: 100 units per second, bursts of 20; transfers cost 5, lookups 1. */
const payments = tokenBucket.paramsSchema.parse({ rate: 100, period: '1s', burst: 20 });

describe('token-bucket: known answers', () => {
  it('payments: 1 token per 10ms, burst 20', () => {
    const rows: Row[] = [
      // t=0: a fresh bucket is full: 20-5 = 15 left
      [t0, 5, true, 15, 0],
      // t=0: 15-5 = 10
      [t0, 5, true, 10, 0],
      // t=0: 10-5 = 5
      [t0, 5, true, 5, 0],
      // t=0: 5-5 = 0, exhausted
      [t0, 5, true, 0, 0],
      // t=0: 0 left; 1 token refills in 1*1000ms/100 = 10ms
      [t0, 1, false, 0, 10],
      // t=10ms: 10ms*100/1000ms = 1 token; a transfer lacks 5-1 = 4 tokens = 40ms
      [t0 + 10, 5, false, 1, 40],
      // t=50ms: 50ms*100/1000ms = 5 tokens (the denials took nothing), 0+5-5 = 0 left
      [t0 + 50, 5, true, 0, 0],
      // t=55ms: 5ms*100/1000ms = 0.5 token; a lookup lacks 0.5 = 5ms
      [t0 + 55, 1, false, 0.5, 5],
      // t=60ms: 0.5+0.5 = 1 token, 1-1 = 0 left
      [t0 + 60, 1, true, 0, 0],
      // t=60ms: a peek (cost 0) is admitted and takes nothing
      [t0 + 60, 0, true, 0, 0],
      // t=1h: 3,599,940ms idle would refill 359,994 tokens; capped at the burst: 20
      [t0 + hour, 0, true, 20, 0],
      // t=1h: the whole burst at once: 20-20 = 0
      [t0 + hour, 20, true, 0, 0],
      // t=1h-1s, time went back: negative elapsed refills nothing; the state is as of t=1h,
      // so the wait is the 1000ms back to it plus 10ms to 1 token
      [t0 + hour - 1_000, 1, false, 0, 1_010],
      // t=1h+10ms: 10ms after the latest instant seen (the 1s back counts for nothing): 1 token
      [t0 + hour + 10, 1, true, 0, 0],
    ];
    expect(replay(tokenBucket, payments, rows)).toEqual(rows);
  });

  it('keeps fractional tokens exactly: rate 3 per 1000ms', () => {
    const p = tokenBucket.paramsSchema.parse({ rate: 3, period: 1_000 });
    const rows: Row[] = [
      // t=0: burst defaults to ceil(3) = 3; take all 3
      [t0, 3, true, 0, 0],
      // t=1ms: 1ms*3/1000ms = 0.003 tokens (not floored); 1 lacks 0.997 = 0.997*1000/3 ms
      [t0 + 1, 1, false, 0.003, expect.closeTo(997 / 3, 9)],
      // t=2ms: 0.003+0.003 = 0.006: the fraction kept at t=1ms was not lost
      [t0 + 2, 0, true, 0.006, 0],
      // t=334ms: 0.006 + 332ms*3/1000ms = 1.002: admitted, 0.002 left
      [t0 + 334, 1, true, expect.closeTo(0.002, 12), 0],
    ];
    expect(replay(tokenBucket, p, rows)).toEqual(rows);
  });

  it('a cost above the burst is INVALID_POLICY and changes nothing', () => {
    // t=0: 20-5 = 15 left; a cost of 21 can never fit a burst of 20. Full again after
    // refilling 5 at 100/s: 50 ms.
    const { t } = expectInvalidPolicy(tokenBucket, payments, t0, {
      firstCost: 5,
      cost: 21,
      limit: 20,
      remaining: 15,
      resetAfterMs: 50,
    });
    expect(tokenBucket.transition(t.state, t0, 0, payments).decision.remaining).toBe(15);
  });

  it('fills defaults: period 1s, burst ceil(rate)', () => {
    expect(tokenBucket.paramsSchema.parse({ rate: 100 })).toEqual({
      rate: 100,
      periodMs: 1_000,
      burst: 100,
    });
    expect(tokenBucket.paramsSchema.parse({ rate: 2.5, period: '1m' })).toEqual({
      rate: 2.5,
      periodMs: 60_000,
      burst: 3,
    });
  });

  itRejectsParams(tokenBucket.paramsSchema, [
    ['negative rate', { rate: -1 }, 'rate'],
    ['burst 0', { rate: 100, burst: 0 }, 'burst'],
    ['bad duration', { rate: 100, period: '5 parsecs' }, 'period'],
    ['unknown field', { rate: 100, brust: 20 }, 'brust'],
  ]);
});
