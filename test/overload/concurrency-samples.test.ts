/**
 * What the concurrency limiter tells its limit algorithm: one sample per release but
 * `ignore`, with the RTT, the in-flight count at admission, `dropped` and `limited`; and
 * the mean hold time it keeps for the queue's estimates.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  ConcurrencyLimiter,
  FixedLimit,
  LoadShedder,
  type LimitAlgorithm,
  type LimitSample,
} from '../../src/overload.js';

/** A fixed limit that keeps every sample it is given. */
function recording(limit: number): LimitAlgorithm & { samples: LimitSample[] } {
  const samples: LimitSample[] = [];
  return { limit, samples, onSample: (s) => samples.push(s) };
}

describe('ConcurrencyLimiter samples', () => {
  it('one sample per release but ignore: RTT on its clock, in flight at admission, dropped, limited since the last sample', () => {
    const clock = new ManualClock(1_000);
    const algorithm = recording(2);
    const shares = { CRITICAL_PLUS: 1, CRITICAL: 1, SHEDDABLE_PLUS: 1, SHEDDABLE: 1 };
    const limiter = new ConcurrencyLimiter({ algorithm, shedder: new LoadShedder(shares), clock });
    const a = limiter.tryAcquire();
    clock.advance(5);
    const b = limiter.tryAcquire();
    expect(limiter.tryAcquire()).toBeUndefined(); // full: the next sample says limited
    clock.advance(10);
    a?.release('success');
    b?.release('dropped');
    const c = limiter.tryAcquire();
    clock.advance(3);
    c?.release('ignore');
    const d = limiter.tryAcquire();
    clock.advance(-50); // a clock that moved back: the RTT is 0, not negative
    d?.release('failure');
    expect(algorithm.samples).toEqual([
      { nowMs: 1_015, rttMs: 15, inflight: 1, dropped: false, limited: true },
      { nowMs: 1_015, rttMs: 10, inflight: 2, dropped: true, limited: false },
      { nowMs: 968, rttMs: 0, inflight: 1, dropped: false, limited: false },
    ]);
  });

  it('a fresh limiter has refused nothing: its first sample is not limited', () => {
    const algorithm = recording(2);
    const limiter = new ConcurrencyLimiter({ algorithm, clock: new ManualClock(0) });
    limiter.tryAcquire()?.release('success');
    expect(algorithm.samples).toMatchObject([{ limited: false }]);
  });

  it('keeps the mean hold time as an EMA of successes and failures (weight 0.1); drops and ignores leave it', () => {
    const clock = new ManualClock(0);
    const limiter = new ConcurrencyLimiter({ algorithm: new FixedLimit(10), clock });
    const hold = (ms: number, outcome: 'success' | 'failure' | 'dropped' | 'ignore') => {
      const p = limiter.tryAcquire();
      clock.advance(ms);
      p?.release(outcome);
      return limiter.meanRttMs;
    };
    expect(limiter.meanRttMs).toBeUndefined();
    expect(hold(500, 'dropped')).toBeUndefined();
    expect(hold(500, 'ignore')).toBeUndefined();
    expect(hold(10, 'success')).toBe(10); // the first sets it
    expect(hold(30, 'failure')).toBe(12); // 10 + 0.1 × (30 − 10)
    expect(hold(500, 'dropped')).toBe(12);
    expect(hold(2, 'success')).toBe(11); // 12 + 0.1 × (2 − 12)
  });

  it('calls onRelease after every release, ignore included, and not for a second release', () => {
    const limiter = new ConcurrencyLimiter({ algorithm: new FixedLimit(3) });
    let released = 0;
    limiter.onRelease = () => released++;
    const a = limiter.tryAcquire();
    const b = limiter.tryAcquire();
    a?.release('ignore');
    a?.release('success');
    b?.release('success');
    expect(released).toBe(2);
    limiter.onRelease = undefined;
    limiter.tryAcquire()?.release('success'); // no listener: nothing to call
    expect(limiter.inflight).toBe(0);
  });

  it('without a criticality a request is CRITICAL, and without a shedder the default shares apply', () => {
    const limiter = new ConcurrencyLimiter({ algorithm: new FixedLimit(10) });
    let n = 0;
    while (limiter.tryAcquire() !== undefined) n++;
    expect(n).toBe(9); // ceil(10 × 0.9)
    expect(limiter.ceiling('SHEDDABLE')).toBe(5);
    const custom = new ConcurrencyLimiter({
      algorithm: new FixedLimit(10),
      shedder: new LoadShedder({
        CRITICAL_PLUS: 1,
        CRITICAL: 0.3,
        SHEDDABLE_PLUS: 0.2,
        SHEDDABLE: 0.1,
      }),
    });
    expect(custom.ceiling('CRITICAL')).toBe(3);
  });

  it('a permit records when it was granted, on the limiter clock, and its criticality', () => {
    const clock = new ManualClock(42);
    const limiter = new ConcurrencyLimiter({ algorithm: new FixedLimit(1), clock });
    expect(limiter.tryAcquire('CRITICAL_PLUS')).toMatchObject({
      criticality: 'CRITICAL_PLUS',
      startMs: 42,
    });
  });
});
