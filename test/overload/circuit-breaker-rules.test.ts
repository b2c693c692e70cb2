/**
 * The circuit breaker's defaults and edges on a manual clock: which rules are on, the
 * slow-call edge, ignored reports, probe leases and retry-after while half-open.
 * test/overload/circuit-breaker.test.ts has the main story.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import {
  CircuitBreaker,
  type BreakerOutcome,
  type CircuitBreakerOptions,
} from '../../src/overload.js';

function setup(options: CircuitBreakerOptions = {}) {
  const clock = new ManualClock(1_000_000);
  const breaker = new CircuitBreaker({ clock, ...options });
  /** One call of `ms` ending with `outcome`; false when refused. */
  const call = (outcome: BreakerOutcome, ms = 1): boolean => {
    const p = breaker.tryAcquire();
    if (p === undefined) return false;
    clock.advance(ms);
    p.record(outcome);
    return true;
  };
  const calls = (n: number, outcome: BreakerOutcome, ms = 1) => {
    for (let i = 0; i < n; i++) call(outcome, ms);
  };
  return { clock, breaker, call, calls };
}

/** Opens `breaker` with failures, then waits until it may probe. */
function openThenWait(s: ReturnType<typeof setup>, failures: number, openMs: number): void {
  s.calls(failures, 'failure');
  expect(s.breaker.state).toBe('open');
  s.clock.advance(openMs);
}

describe('CircuitBreaker defaults', () => {
  it('error ratio 0.5 over 20 calls at least, open 5 s, 3 probes, leases of 10 s', () => {
    const s = setup();
    s.calls(19, 'failure');
    expect(s.breaker.state).toBe('closed'); // 19 < minimumCalls 20
    s.call('failure');
    expect(s.breaker.state).toBe('open');
    expect(s.breaker.retryAfterMs()).toBe(5_000);
    s.clock.advance(4_999);
    expect(s.breaker.tryAcquire()).toBeUndefined();
    s.clock.advance(1);
    const probes = [s.breaker.tryAcquire(), s.breaker.tryAcquire(), s.breaker.tryAcquire()];
    expect(probes.every((p) => p?.probe === true)).toBe(true);
    expect(s.breaker.tryAcquire()).toBeUndefined();
    expect(s.breaker.retryAfterMs()).toBe(10_000); // until the first lease expires
    s.clock.advance(10_000);
    expect(s.breaker.tryAcquire()?.probe).toBe(true);
  });

  it('the default window is 10 s: failures older than that no longer count', () => {
    const s = setup({ minimumCalls: 2 });
    s.call('success');
    s.clock.advance(10_000);
    s.call('failure'); // the success has left the window: 1 call
    expect(s.breaker.state).toBe('closed');
    s.call('success'); // 1 failure of 2 calls: 0.5
    expect(s.breaker.state).toBe('open');
  });
});

describe('CircuitBreaker rules', () => {
  it('setting any rule turns the default error ratio off', () => {
    const slowOnly = setup({ minimumCalls: 5, slowCallRatio: 0.5, slowCallMs: 100 });
    slowOnly.calls(20, 'failure');
    expect(slowOnly.breaker.state).toBe('closed');
    const countOnly = setup({ minimumCalls: 5, errorCount: 100 });
    countOnly.calls(20, 'failure');
    expect(countOnly.breaker.state).toBe('closed');
    const ratio = setup({ minimumCalls: 4, errorRatio: 0.9 });
    ratio.calls(2, 'success');
    ratio.calls(10, 'failure'); // 10/12 < 0.9
    expect(ratio.breaker.state).toBe('closed');
    ratio.calls(8, 'failure'); // 18/20 = 0.9
    expect(ratio.breaker.state).toBe('open');
  });

  it('a call lasting exactly slowCallMs is slow; one a millisecond shorter is not', () => {
    const edge = setup({ minimumCalls: 4, slowCallRatio: 1, slowCallMs: 100 });
    edge.calls(3, 'success', 100);
    edge.call('success', 99);
    expect(edge.breaker.state).toBe('closed'); // 3/4 slow
    const slow = setup({ minimumCalls: 4, slowCallRatio: 1, slowCallMs: 100 });
    slow.calls(4, 'success', 100);
    expect(slow.breaker.state).toBe('open');
  });

  it('a slow-call duration alone sets no rule, and a slow-call ratio needs it', () => {
    const s = setup({ minimumCalls: 2, slowCallMs: 10 });
    s.calls(5, 'success', 50);
    expect(s.breaker.state).toBe('closed');
    s.calls(5, 'failure'); // the default error ratio is still on
    expect(s.breaker.state).toBe('open');
    let error: unknown;
    try {
      new CircuitBreaker({ slowCallRatio: 0.5 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyError);
    expect(error).toMatchObject({
      code: 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
      message: 'circuit breaker: slowCallRatio needs slowCallMs',
    });
  });

  it('ignored calls and second reports are not counted', () => {
    const s = setup({ minimumCalls: 2 });
    s.calls(10, 'ignore');
    s.call('failure');
    expect(s.breaker.state).toBe('closed'); // 1 call counted
    const p = s.breaker.tryAcquire();
    p?.record('success');
    p?.record('failure'); // ignored: 1 failure of 2
    expect(s.breaker.state).toBe('open');
    const twice = setup({ minimumCalls: 3 });
    const q = twice.breaker.tryAcquire();
    q?.record('failure');
    q?.record('failure');
    q?.record('failure');
    expect(twice.breaker.state).toBe('closed');
  });

  it('closing starts a fresh window: the failures that opened it do not count again', () => {
    const s = setup({ minimumCalls: 4, probes: 1 });
    openThenWait(s, 4, 5_000);
    expect(s.call('success')).toBe(true); // the probe closes it
    expect(s.breaker.state).toBe('closed');
    s.calls(3, 'success');
    s.call('failure'); // 1 failure of 4 since closing
    expect(s.breaker.state).toBe('closed');
  });
});

describe('CircuitBreaker probes', () => {
  it('each success counts once; an ignored probe frees its slot; a slow successful probe reopens it', () => {
    const s = setup({ minimumCalls: 1, probes: 2, openMs: 1_000, slowCallMs: 100 });
    openThenWait(s, 1, 1_000);
    const a = s.breaker.tryAcquire();
    a?.record('success');
    a?.record('success');
    expect(s.breaker.state).toBe('half-open'); // 1 success of 2
    const b = s.breaker.tryAcquire();
    expect(s.breaker.tryAcquire()).toBeUndefined(); // 1 success + 1 lease
    b?.record('ignore');
    expect(s.breaker.probesInFlight).toBe(0);
    const c = s.breaker.tryAcquire();
    expect(c?.probe).toBe(true);
    s.clock.advance(100);
    c?.record('success'); // slow: 100 ms ≥ slowCallMs
    expect(s.breaker.state).toBe('open');
    expect(s.breaker.retryAfterMs()).toBe(1_000);
  });

  it('a probe that reports exactly at its lease expiry is stale: it neither closes nor reopens', () => {
    const s = setup({ minimumCalls: 1, probes: 1, openMs: 1_000, probeLeaseMs: 500 });
    openThenWait(s, 1, 1_000);
    const p = s.breaker.tryAcquire();
    s.clock.advance(500);
    p?.record('failure');
    expect(s.breaker.state).toBe('half-open');
    const q = s.breaker.tryAcquire();
    s.clock.advance(499);
    q?.record('success');
    expect(s.breaker.state).toBe('closed');
  });

  it('half-open and full, retry-after is the time until the first lease of those held expires', () => {
    const s = setup({ minimumCalls: 1, probes: 2, openMs: 1_000, probeLeaseMs: 300 });
    openThenWait(s, 1, 1_000);
    expect(s.breaker.retryAfterMs()).toBe(0); // open, but its time is up
    s.breaker.tryAcquire(); // lease to +300
    s.clock.advance(100);
    expect(s.breaker.retryAfterMs()).toBe(0); // half-open with a free slot
    s.breaker.tryAcquire(); // lease to +400
    s.clock.advance(50);
    expect(s.breaker.retryAfterMs()).toBe(150);
    expect(s.breaker.probesInFlight).toBe(2);
    s.clock.advance(150); // the first lease expires: its slot goes to a new probe
    expect(s.breaker.tryAcquire()?.probe).toBe(true);
    expect(s.breaker.retryAfterMs()).toBe(100); // the second lease, now the first to expire
  });

  it('half-open, successes and leases together fill the probes: retry-after is the time until a lease expires', () => {
    const s = setup({ minimumCalls: 1, probes: 2, openMs: 1_000, probeLeaseMs: 300 });
    openThenWait(s, 1, 1_000);
    s.breaker.tryAcquire()?.record('success'); // 1 success of 2
    s.breaker.tryAcquire(); // the second probe, lease to +300
    s.clock.advance(120);
    expect(s.breaker.tryAcquire()).toBeUndefined();
    expect(s.breaker.retryAfterMs()).toBe(180);
  });

  it('closed, retry-after is 0, and a permit is not a probe', () => {
    const s = setup();
    expect(s.breaker.retryAfterMs()).toBe(0);
    expect(s.breaker.tryAcquire()?.probe).toBe(false);
  });
});
