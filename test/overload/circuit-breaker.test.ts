/** The circuit breaker on a manual clock: trip rules, probes, leases. */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  CircuitBreaker,
  type BreakerOutcome,
  type CircuitBreakerOptions,
} from '../../src/overload.js';

function setup(options: CircuitBreakerOptions = {}) {
  const clock = new ManualClock(1_000_000);
  const breaker = new CircuitBreaker({
    clock,
    minimumCalls: 10,
    openMs: 5_000,
    probes: 3,
    probeLeaseMs: 2_000,
    ...options,
  });
  /** Makes one call that takes `ms` and ends with `outcome`; false when refused. */
  const call = (outcome: BreakerOutcome, ms = 1): boolean => {
    const p = breaker.tryAcquire();
    if (p === undefined) return false;
    clock.advance(ms);
    p.record(outcome);
    return true;
  };
  return { clock, breaker, call };
}

describe('CircuitBreaker', () => {
  it('a failing dependency opens it at exactly the configured minimum of calls (error ratio 0.5)', () => {
    const { breaker, call } = setup();
    for (let i = 1; i <= 9; i++) {
      expect(call('failure')).toBe(true);
      expect(breaker.state).toBe('closed'); // 9 calls < minimumCalls 10
    }
    expect(call('failure')).toBe(true); // the 10th: 10/10 failures ≥ 0.5
    expect(breaker.state).toBe('open');
    expect(call('success')).toBe(false);
  });

  it('mixed traffic: opens when failures reach the ratio over the window, not before', () => {
    const { breaker, call } = setup({ errorRatio: 0.5 });
    for (let i = 0; i < 6; i++) call('success');
    for (let i = 0; i < 5; i++) call('failure'); // 5/11 < 0.5
    expect(breaker.state).toBe('closed');
    call('failure'); // 6/12 = 0.5
    expect(breaker.state).toBe('open');
  });

  it('old calls leave the sliding window: failures spread thinner than the window never trip it', () => {
    const { breaker, call, clock } = setup({ windowMs: 10_000, buckets: 10 });
    for (let i = 0; i < 100; i++) {
      call('failure');
      clock.advance(2_000); // at most 5 calls in any 10 s window < minimumCalls 10
    }
    expect(breaker.state).toBe('closed');
  });

  it('slow-call ratio and error count rules', () => {
    const slow = setup({ slowCallRatio: 0.8, slowCallMs: 100 });
    for (let i = 0; i < 8; i++) slow.call('success', 150);
    for (let i = 0; i < 2; i++) slow.call('success', 10);
    expect(slow.breaker.state).toBe('open'); // 8/10 slow
    const count = setup({ errorCount: 3, minimumCalls: 1 });
    count.call('failure');
    count.call('failure');
    for (let i = 0; i < 50; i++) count.call('success');
    expect(count.breaker.state).toBe('closed');
    count.call('failure');
    expect(count.breaker.state).toBe('open'); // 3 failures in the window, whatever the ratio
  });

  it('half-open admits N probes at once; N successes close it; one failing probe reopens it', () => {
    const { breaker, call, clock } = setup();
    for (let i = 0; i < 10; i++) call('failure');
    clock.advance(4_999);
    expect(breaker.tryAcquire()).toBeUndefined();
    expect(breaker.retryAfterMs()).toBe(1);
    clock.advance(1);
    const probes = [breaker.tryAcquire(), breaker.tryAcquire(), breaker.tryAcquire()];
    expect(probes.map((p) => p?.probe)).toEqual([true, true, true]);
    expect(breaker.state).toBe('half-open');
    expect(breaker.tryAcquire()).toBeUndefined(); // only 3 probes
    probes[0]?.record('success');
    probes[1]?.record('success');
    expect(breaker.tryAcquire()).toBeUndefined(); // 2 successes + 1 lease = 3
    probes[2]?.record('success');
    expect(breaker.state).toBe('closed');
    expect(call('success')).toBe(true);

    for (let i = 0; i < 10; i++) call('failure');
    clock.advance(5_000);
    const p = breaker.tryAcquire();
    p?.record('failure');
    expect(breaker.state).toBe('open');
    expect(breaker.retryAfterMs()).toBe(5_000);
  });

  it('an abandoned probe does not wedge it: its lease expires, another probe takes the slot, its late report is ignored', () => {
    const { breaker, clock } = setup({ probes: 1, probeLeaseMs: 2_000 });
    for (let i = 0; i < 10; i++) breaker.tryAcquire()?.record('failure');
    clock.advance(5_000);
    const abandoned = breaker.tryAcquire();
    expect(abandoned?.probe).toBe(true);
    clock.advance(1_999);
    expect(breaker.tryAcquire()).toBeUndefined(); // the lease still holds the slot
    expect(breaker.retryAfterMs()).toBe(1);
    clock.advance(1);
    const next = breaker.tryAcquire(); // lease expired: a fresh probe
    expect(next?.probe).toBe(true);
    abandoned?.record('failure'); // stale: must not reopen it
    expect(breaker.state).toBe('half-open');
    next?.record('success');
    expect(breaker.state).toBe('closed');
  });

  it('a call admitted before the breaker opened does not count as a probe when it ends', () => {
    const { breaker, clock, call } = setup({ probes: 1 });
    const early = breaker.tryAcquire();
    for (let i = 0; i < 10; i++) call('failure');
    clock.advance(5_000);
    const probe = breaker.tryAcquire();
    early?.record('success');
    expect(breaker.state).toBe('half-open');
    probe?.record('success');
    expect(breaker.state).toBe('closed');
  });
});
