/**
 * StaleBudgets, the local budgets of the `stale` failure mode, with a manual clock:
 * what a budget admits, what it refills, when it expires, and its bound.
 * failure-modes.test.ts shows the same through the limiter.
 */
import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import type { AlgorithmDecision } from '../../src/core/decision.js';
import type { Policy } from '../../src/core/policy.js';
import { StaleBudgets } from '../../src/limiter/stale-budgets.js';

const t0 = 1_000_000;
const stale = { failureMode: 'stale' as const, stale: { ttl: '1s' } };
const [tokenBucket, gcra, leaky, fixedWindow, slidingLog] = parsePolicies([
  // 10 per 1s: 0.01 units per ms
  { name: 'tb', match: ['t'], rate: 10, burst: 20, ...stale },
  { name: 'gcra', match: ['t'], algorithm: 'gcra', rate: 10, burst: 20, ...stale },
  { name: 'leaky', match: ['t'], algorithm: 'leaky-bucket', rate: 10, capacity: 20, ...stale },
  { name: 'fw', match: ['t'], algorithm: 'fixed-window', limit: 20, window: '1m', ...stale },
  { name: 'log', match: ['t'], algorithm: 'sliding-log', limit: 20, window: '1m', ...stale },
]).policies as Policy[];

/** A store's answer that left `remaining` of `limit`. */
const answer = (remaining: number, limit = 20): AlgorithmDecision => ({
  status: 'OK',
  allowed: true,
  limit,
  remaining,
  retryAfterMs: 0,
  resetAfterMs: 0,
});

describe('StaleBudgets', () => {
  it('admits up to the last reported remaining, without spending on peek', () => {
    const b = new StaleBudgets();
    b.record('k', answer(5), t0);
    expect(b.peek('k', tokenBucket!, 5, t0)).toEqual({
      status: 'OK',
      allowed: true,
      limit: 20,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 0,
    });
    expect(b.peek('k', tokenBucket!, 3, t0)?.remaining).toBe(2);
    expect(b.peek('k', tokenBucket!, 5, t0)?.allowed).toBe(true); // peeks spent nothing
  });

  it('denies what does not fit with the wait for the refill, and spends only on spend()', () => {
    const b = new StaleBudgets();
    b.record('k', answer(5), t0);
    // 5 left; 8 lacks 3 units at 0.01 per ms: 300 ms
    expect(b.peek('k', tokenBucket!, 8, t0)).toEqual({
      status: 'OVER_LIMIT',
      allowed: false,
      limit: 20,
      remaining: 5,
      retryAfterMs: 300,
      resetAfterMs: 0,
    });
    b.spend('k', tokenBucket!, 4, t0);
    expect(b.peek('k', tokenBucket!, 0, t0)?.remaining).toBe(1);
    // 100 ms later: 1 + 1 refilled = 2
    b.spend('k', tokenBucket!, 2, t0 + 100);
    expect(b.peek('k', tokenBucket!, 0, t0 + 100)?.remaining).toBe(0);
    // an earlier instant refills nothing and does not move the budget's time back
    b.spend('k', tokenBucket!, 0, t0 + 50);
    expect(b.peek('k', tokenBucket!, 0, t0 + 200)?.remaining).toBe(1);
  });

  it('refills token bucket, GCRA and leaky bucket budgets at the rate, never above the limit', () => {
    for (const policy of [tokenBucket!, gcra!, leaky!]) {
      const b = new StaleBudgets();
      b.record('k', answer(0), t0);
      // 250 ms at 0.01 per ms: 2.5 units
      expect(b.peek('k', policy, 0, t0 + 250)?.remaining).toBe(2.5);
      // a refill of 10 units on top of 15 stops at 20
      b.record('k', answer(15), t0);
      expect(b.peek('k', policy, 0, t0 + 1_000)?.remaining).toBe(20);
    }
  });

  it('refills nothing for window algorithms; a denial waits for the end of the stale TTL', () => {
    for (const policy of [fixedWindow!, slidingLog!]) {
      const b = new StaleBudgets();
      b.record('k', answer(2), t0);
      expect(b.peek('k', policy, 0, t0 + 900)?.remaining).toBe(2);
      // reported at t0 with a 1s TTL: 1000 - 400 = 600 ms left of it
      expect(b.peek('k', policy, 3, t0 + 400)).toMatchObject({
        allowed: false,
        remaining: 2,
        retryAfterMs: 600,
      });
    }
  });

  it('gives a tiny shortfall its tiny wait, and a denial at the end of the TTL a wait above 0', () => {
    const b = new StaleBudgets();
    b.record('k', answer(1 - 2e-9), t0);
    // lacks 2e-9 units at 0.01 per ms: 2e-7 ms
    expect(b.peek('k', tokenBucket!, 1, t0)!.retryAfterMs).toBeCloseTo(2e-7, 12);
    b.record('k', answer(2), t0);
    expect(b.peek('k', fixedWindow!, 3, t0 + 1_000)?.retryAfterMs).toBe(1e-9);
  });

  it('admits a cost that fits to within 1e-9 units', () => {
    const b = new StaleBudgets();
    b.record('k', answer(1 - 1e-9), t0);
    expect(b.peek('k', fixedWindow!, 1, t0)?.allowed).toBe(true);
    b.record('k', answer(1 - 3e-9), t0);
    expect(b.peek('k', fixedWindow!, 1, t0)?.allowed).toBe(false);
  });

  it('has nothing for a bucket never reported, or reported longer than the TTL ago', () => {
    const b = new StaleBudgets();
    expect(b.peek('k', tokenBucket!, 1, t0)).toBeUndefined();
    b.spend('k', tokenBucket!, 1, t0); // nothing to spend from: no budget appears
    expect(b.peek('k', tokenBucket!, 0, t0)).toBeUndefined();
    b.record('k', answer(5), t0);
    expect(b.peek('k', tokenBucket!, 1, t0 + 1_000)?.allowed).toBe(true); // TTL is inclusive
    expect(b.peek('k', tokenBucket!, 1, t0 + 1_001)).toBeUndefined();
    // a policy without stale settings has a TTL of 0: only the instant of the report
    const [plain] = parsePolicies([{ name: 'p', match: ['t'], rate: 10 }]).policies;
    expect(b.peek('k', plain!, 1, t0)?.allowed).toBe(true);
    expect(b.peek('k', plain!, 1, t0 + 1)).toBeUndefined();
  });

  it('holds at most maxBuckets, dropping the least recently reported', () => {
    const b = new StaleBudgets(2);
    b.record('a', answer(5), t0);
    b.record('b', answer(5), t0);
    b.record('a', answer(4), t0); // a is now the most recent
    b.record('c', answer(5), t0); // drops b
    expect(b.peek('a', tokenBucket!, 0, t0)?.remaining).toBe(4);
    expect(b.peek('b', tokenBucket!, 0, t0)).toBeUndefined();
    expect(b.peek('c', tokenBucket!, 0, t0)?.remaining).toBe(5);
  });

  it('holds 100,000 buckets by default', () => {
    const b = new StaleBudgets();
    for (let i = 0; i <= 100_000; i++) b.record(`k${i}`, answer(1), t0);
    expect(b.peek('k0', tokenBucket!, 0, t0)).toBeUndefined();
    expect(b.peek('k1', tokenBucket!, 0, t0)?.remaining).toBe(1);
  });
});
