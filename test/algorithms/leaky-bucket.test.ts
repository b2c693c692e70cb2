/**
 * Known answers for the leaky bucket: rows [nowMs, cost, allowed, remaining, retryAfterMs,
 * delayMs] replayed in order on one queue, each derived by hand in its comment (level =
 * units queued; remaining = capacity - level). Invariants over generated runs live in
 * leaky-bucket.property.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { leakyBucket } from '../../src/algorithms/leaky-bucket.js';
import {
  expectInvalidPolicy,
  hour,
  itRejectsParams,
  replayWithDelay,
  t0,
  type DelayRow as Row,
} from './known-answers.js';
/** The payments example: 100 leak per 1s (1 per 10ms), queue of 20; transfers cost 5, lookups 1. */
const payments = (mode: 'reject' | 'delay') =>
  leakyBucket.paramsSchema.parse({ rate: 100, period: '1s', capacity: 20, mode });

describe('leaky-bucket: known answers', () => {
  it('reject mode (a policer): the token bucket answers, never a delayMs', () => {
    const rows: Row[] = [
      // t=0: an empty queue: level 0+5 = 5, 15 free
      [t0, 5, true, 15, 0, undefined],
      // t=0: level 10, 10 free
      [t0, 5, true, 10, 0, undefined],
      // t=0: level 15, 5 free
      [t0, 5, true, 5, 0, undefined],
      // t=0: level 20 = capacity exactly: admitted, 0 free
      [t0, 5, true, 0, 0, undefined],
      // t=0: full; 1 unit must leak first: 1*1000ms/100 = 10ms
      [t0, 1, false, 0, 10, undefined],
      // t=10ms: 10ms*100/1000ms = 1 leaked, level 19; 19+5-20 = 4 must leak = 40ms
      [t0 + 10, 5, false, 1, 40, undefined],
      // t=50ms: 5 leaked (the denials added nothing), level 15+5 = 20
      [t0 + 50, 5, true, 0, 0, undefined],
      // t=55ms: 0.5 leaked, level 19.5; 19.5+1-20 = 0.5 must leak = 5ms
      [t0 + 55, 1, false, 0.5, 5, undefined],
      // t=60ms: level 19+1 = 20
      [t0 + 60, 1, true, 0, 0, undefined],
      // t=60ms: a peek (cost 0) adds nothing
      [t0 + 60, 0, true, 0, 0, undefined],
      // t=1h: the queue emptied long ago: level max(0, 20 - 359,994) = 0, 20 free
      [t0 + hour, 0, true, 20, 0, undefined],
      // t=1h: fill it at once: level 20
      [t0 + hour, 20, true, 0, 0, undefined],
      // t=1h-1s, time went back: negative elapsed leaks nothing; the state is as of t=1h,
      // so the wait is the 1000ms back to it plus 10ms to 1 free unit
      [t0 + hour - 1_000, 1, false, 0, 1_010, undefined],
      // t=1h+10ms: 10ms after the latest instant seen (the 1s back counts for nothing)
      [t0 + hour + 10, 1, true, 0, 0, undefined],
    ];
    expect(replayWithDelay(leakyBucket, payments('reject'), rows)).toEqual(rows);
  });

  it('delay mode (a shaper): admitted units leave 10ms apart, in order', () => {
    const rows: Row[] = [
      // t=0: nothing queued ahead: proceed at once (release t=0); level 5
      [t0, 5, true, 15, 0, 0],
      // t=0: 5 units ahead leak in 5*10ms = 50ms (release t=50 = 0 + 5 units*10ms)
      [t0, 5, true, 10, 0, 50],
      // t=0: 10 ahead: 100ms (release t=100)
      [t0, 5, true, 5, 0, 100],
      // t=0: 15 ahead: 150ms (release t=150); level 20, the queue is full
      [t0, 5, true, 0, 0, 150],
      // t=0: full: denied, not queued (no delayMs); 1 unit leaks in 10ms
      [t0, 1, false, 0, 10, undefined],
      // t=10ms: level 19; 4 more must leak: 40ms
      [t0 + 10, 5, false, 1, 40, undefined],
      // t=50ms: level 15: 150ms ahead, release t=200 = previous release 150 + 5 units*10ms
      [t0 + 50, 5, true, 0, 0, 150],
      // t=300ms: level max(0, 20 - 25) = 0: proceed at once (release t=300); level 1
      [t0 + 300, 1, true, 19, 0, 0],
      // t=305ms: level 0.5 ahead: 5ms, release t=310 = 300 + 1 unit*10ms; level 1.5
      [t0 + 305, 1, true, 18.5, 0, 5],
      // t=305ms: a peek sees 1.5 units ahead: 15ms, and queues nothing
      [t0 + 305, 0, true, 18.5, 0, 15],
    ];
    expect(replayWithDelay(leakyBucket, payments('delay'), rows)).toEqual(rows);
  });

  it('keeps fractional levels exactly: rate 3 per 1000ms', () => {
    const p = leakyBucket.paramsSchema.parse({ rate: 3, period: 1_000 });
    const rows: Row[] = [
      // t=0: capacity defaults to ceil(3) = 3; fill it
      [t0, 3, true, 0, 0, undefined],
      // t=1ms: 1ms*3/1000ms = 0.003 leaked (level 2.997, not rounded); 1 more unit needs
      // 0.997 to leak = 0.997*1000/3 ms
      [t0 + 1, 1, false, expect.closeTo(0.003, 12), expect.closeTo(997 / 3, 9), undefined],
      // t=2ms: 0.006 leaked in all: the fraction from t=1ms was kept
      [t0 + 2, 0, true, expect.closeTo(0.006, 12), 0, undefined],
      // t=334ms: 1.002 leaked, level 1.998+1 = 2.998, 0.002 free
      [t0 + 334, 1, true, expect.closeTo(0.002, 12), 0, undefined],
    ];
    expect(replayWithDelay(leakyBucket, p, rows)).toEqual(rows);
  });

  it('a cost above the capacity is INVALID_POLICY and changes nothing', () => {
    // t=0: level 5, 15 free; a cost of 21 can never fit a queue of 20. Empty after
    // leaking 5 at 100/s: 50 ms.
    const { state, t } = expectInvalidPolicy(leakyBucket, payments('delay'), t0, {
      firstCost: 5,
      cost: 21,
      limit: 20,
      remaining: 15,
      resetAfterMs: 50,
    });
    expect(t.state).toEqual(state);
  });

  it('fills defaults: period 1s, capacity ceil(rate), mode reject; ttl drains a full queue', () => {
    expect(leakyBucket.paramsSchema.parse({ rate: 100 })).toEqual({
      rate: 100,
      periodMs: 1_000,
      capacity: 100,
      mode: 'reject',
    });
    // 20 units * 10ms
    expect(leakyBucket.ttlMs(payments('reject'))).toBe(200);
    expect(leakyBucket.capacity(payments('reject'))).toBe(20);
  });

  itRejectsParams(leakyBucket.paramsSchema, [
    ['negative rate', { rate: -1 }, 'rate'],
    ['capacity 0', { rate: 100, capacity: 0 }, 'capacity'],
    ['bad duration', { rate: 100, period: '5 parsecs' }, 'period'],
    ['unknown mode', { rate: 100, mode: 'queue' }, 'mode'],
    ['unknown field (burst is the token bucket name)', { rate: 100, burst: 20 }, 'burst'],
  ]);
});
