/**
 * The retry budget on a manual clock: retries stay below max(minRetries, ratio × first
 * attempts) over a sliding window, counted per slice of windowMs / 10.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import { RetryBudget } from '../../src/overload.js';

/** Retries taken until the budget refuses one (at most 1,000). */
function drain(budget: RetryBudget): number {
  let n = 0;
  while (n < 1_000 && budget.tryRetry()) n++;
  return n;
}

describe('RetryBudget', () => {
  it('defaults: 10 retries with no traffic; 10 % of first attempts once that is more', () => {
    const clock = new ManualClock(1_000_000);
    const budget = new RetryBudget({ clock });
    expect(drain(budget)).toBe(10); // max(10, 0.1 × 0)
    for (let i = 0; i < 150; i++) budget.request();
    // max(10, 0.1 × 150) = 15, and 10 are spent: 5 more.
    expect(drain(budget)).toBe(5);
  });

  it('the larger of the two bounds holds, exactly: retries < max(minRetries, ratio × requests)', () => {
    const clock = new ManualClock(0);
    const budget = new RetryBudget({ ratio: 0.5, minRetries: 2, clock });
    expect(drain(budget)).toBe(2); // max(2, 0) = 2: the second is still allowed
    for (let i = 0; i < 9; i++) budget.request();
    // max(2, 0.5 × 9 = 4.5): retries 2, 3, 4 pass (each < 4.5), the sixth does not.
    expect(drain(budget)).toBe(3);
    budget.request(); // 10 requests: 0.5 × 10 = 5, and 5 are spent
    expect(budget.tryRetry()).toBe(false);
  });

  it('ratio 0 and minRetries 0 refuse every retry; ratio 1 allows one per first attempt', () => {
    const clock = new ManualClock(0);
    const none = new RetryBudget({ ratio: 0, minRetries: 0, clock });
    none.request();
    expect(none.tryRetry()).toBe(false);
    const one = new RetryBudget({ ratio: 1, minRetries: 0, clock });
    for (let i = 0; i < 4; i++) one.request();
    expect(drain(one)).toBe(4);
  });

  it('spent retries slide out of the window slice by slice, on the clock given', () => {
    const clock = new ManualClock(0);
    // windowMs 1000 in 10 slices of 100 ms.
    const budget = new RetryBudget({ ratio: 0, minRetries: 2, windowMs: 1_000, clock });
    expect(drain(budget)).toBe(2); // both in slice 0 ([0, 100))
    clock.set(999); // slice 9: slice 0 is still inside the window
    expect(budget.tryRetry()).toBe(false);
    clock.set(1_000); // slice 10: slice 0 has left it
    expect(drain(budget)).toBe(2);
  });

  it('first attempts slide out too: the ratio is over the window only', () => {
    const clock = new ManualClock(0);
    const budget = new RetryBudget({ ratio: 0.5, minRetries: 0, windowMs: 1_000, clock });
    for (let i = 0; i < 4; i++) budget.request();
    clock.set(1_000);
    expect(budget.tryRetry()).toBe(false); // the 4 requests of slice 0 no longer count
    for (let i = 0; i < 4; i++) budget.request();
    expect(drain(budget)).toBe(2);
  });

  it('a clock that moves backwards counts at the latest instant seen', () => {
    const clock = new ManualClock(5_000);
    const budget = new RetryBudget({ ratio: 0, minRetries: 1, windowMs: 1_000, clock });
    expect(budget.tryRetry()).toBe(true); // counted in slice 50
    clock.set(0); // back 5 s: still slice 50, the retry still counts
    expect(budget.tryRetry()).toBe(false);
    clock.set(6_000); // slice 60: slice 50 has left the window
    expect(budget.tryRetry()).toBe(true);
  });

  it('refuses options out of range, naming the option, its range and the value', () => {
    const cases: [ConstructorParameters<typeof RetryBudget>[0], string][] = [
      [{ ratio: -0.1 }, 'retry budget: ratio must be in [0, 1], got -0.1'],
      [{ ratio: 1.5 }, 'retry budget: ratio must be in [0, 1], got 1.5'],
      [{ minRetries: -1 }, 'retry budget: minRetries must be in [0, ∞), got -1'],
      [{ windowMs: 0 }, 'retry budget: windowMs must be in (0, ∞), got 0'],
      [{ ratio: '0.5' as never }, 'retry budget: ratio must be in [0, 1], got 0.5'],
      [{ ratio: Number.NaN }, 'retry budget: ratio must be in [0, 1], got NaN'],
    ];
    for (const [options, message] of cases) {
      let error: unknown;
      try {
        new RetryBudget(options);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PolicyError);
      expect(error).toMatchObject({ code: 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID', message });
    }
    // The ends of each range are inside it.
    expect(() => new RetryBudget({ ratio: 0, minRetries: 0, windowMs: 0.001 })).not.toThrow();
    expect(() => new RetryBudget({ ratio: 1, minRetries: Infinity })).not.toThrow();
  });
});
