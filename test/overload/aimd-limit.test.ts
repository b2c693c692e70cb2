/**
 * The AIMD limit sample by sample: known-answer rows for its defaults, bounds and edges.
 * test/overload/gradient-limit.test.ts has its basic rule.
 */
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import { AimdLimit, FixedLimit, type AimdLimitOptions } from '../../src/overload.js';

function sample(a: AimdLimit, rttMs: number, inflight: number, dropped = false): number {
  a.onSample({ nowMs: 0, rttMs, inflight, dropped, limited: false });
  return a.limit;
}

describe('AimdLimit', () => {
  it('defaults: starts at 20, grows to 200 at most, backs off by 0.9 down to 1, times out above 5 s', () => {
    const a = new AimdLimit();
    expect(a.limit).toBe(20);
    for (let i = 0; i < 300; i++) sample(a, 1, 1_000);
    expect(a.limit).toBe(200);
    expect(sample(a, 5_000, 1_000)).toBe(200); // 5 s is not slower than the timeout: +1, capped
    expect(sample(a, 5_001, 1_000)).toBe(180); // 200 × 0.9
    for (let i = 0; i < 100; i++) sample(a, 1, 1, true);
    expect(a.limit).toBe(1);
  });

  it('grows only while at least half the limit is in flight: inflight × 2 ≥ limit', () => {
    const a = new AimdLimit({ initial: 10 });
    expect(sample(a, 1, 4)).toBe(10); // 8 < 10
    expect(sample(a, 1, 5)).toBe(11); // 10 ≥ 10
  });

  it('a drop backs off whatever its RTT; a sample at exactly the timeout does not', () => {
    const a = new AimdLimit({ initial: 10, timeoutMs: 100, backoffRatio: 0.5 });
    expect(sample(a, 0, 0, true)).toBe(5); // 10 × 0.5
    expect(sample(a, 100, 0)).toBe(5); // not slower: no backoff, and idle: no growth
    expect(sample(a, 101, 0)).toBe(2); // 2.5
  });

  it('starts within [min, max] and backs off no lower than min', () => {
    expect(new AimdLimit({ initial: 500 }).limit).toBe(200);
    expect(new AimdLimit({ initial: 1, min: 4 }).limit).toBe(4);
    const a = new AimdLimit({ initial: 6, min: 4, max: 8 });
    expect(sample(a, 1, 0, true)).toBe(5); // 5.4
    expect(sample(a, 1, 0, true)).toBe(4); // 4.86
    expect(sample(a, 1, 0, true)).toBe(4); // 4.374
    expect(sample(a, 1, 0, true)).toBe(4); // 3.9366 → min 4
    expect(sample(a, 1, 0, true)).toBe(4);
    for (let i = 0; i < 10; i++) sample(a, 1, 8);
    expect(a.limit).toBe(8);
  });

  it('refuses options out of range, naming the option, its range and the value', () => {
    const cases: [AimdLimitOptions, string][] = [
      [{ min: 0 }, 'AIMD limit: min must be in [1, ∞), got 0'],
      [{ min: 5, max: 4 }, 'AIMD limit: min must be in [1, 4], got 5'],
      [{ max: 0.5 }, 'AIMD limit: max must be in [1, ∞), got 0.5'],
      [{ initial: 0 }, 'AIMD limit: initial must be in [1, ∞), got 0'],
      [{ backoffRatio: 0.4 }, 'AIMD limit: backoffRatio must be in [0.5, 0.999999], got 0.4'],
      [{ timeoutMs: 0 }, 'AIMD limit: timeoutMs must be in (0, ∞), got 0'],
    ];
    for (const [options, message] of cases) {
      let error: unknown;
      try {
        new AimdLimit(options);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PolicyError);
      expect(error).toMatchObject({ code: 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID', message });
    }
    expect(() => new AimdLimit({ min: 5 })).not.toThrow();
    expect(() => new AimdLimit({ max: 5 })).not.toThrow();
    expect(() => new AimdLimit({ min: 3, max: 3, initial: 3, backoffRatio: 0.5 })).not.toThrow();
  });
});

describe('FixedLimit', () => {
  it('takes any whole number from 1, and refuses 0, fractions and NaN', () => {
    expect(new FixedLimit(1).limit).toBe(1);
    new FixedLimit(1).onSample();
    for (const bad of [0, -3, 2.5, Number.NaN]) {
      expect(() => new FixedLimit(bad)).toThrow(
        new PolicyError(
          'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
          `fixed limit: limit must be a whole number >= 1, got ${String(bad)}`,
        ),
      );
    }
  });
});
