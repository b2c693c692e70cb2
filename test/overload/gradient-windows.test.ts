/**
 * The gradient limit's windows and edges, sample by sample on named instants: how long a
 * window lasts, the 0.5 floor of the gradient, smoothing, the growth edge, the unloaded
 * edge of the no-load RTT, and its options. test/overload/gradient-limit.test.ts has the
 * stated periods.
 */
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import { GradientLimit, type GradientLimitOptions } from '../../src/overload.js';

function sample(
  g: GradientLimit,
  nowMs: number,
  rttMs: number,
  inflight: number,
  flags: { dropped?: boolean; limited?: boolean } = {},
): number {
  g.onSample({
    nowMs,
    rttMs,
    inflight,
    dropped: flags.dropped ?? false,
    limited: flags.limited ?? false,
  });
  return g.limit;
}

describe('GradientLimit windows', () => {
  it('a window lasts the last mean RTT, within [minWindowMs, maxWindowMs]; the gradient is floored at 0.5', () => {
    const g = new GradientLimit({ initial: 16, max: 100, minWindowMs: 5, maxWindowMs: 50 });
    expect(g.recentRttMs).toBeUndefined();
    // No window closed yet: the first lasts minWindowMs (5 ms).
    for (let t = 0; t <= 4; t++) expect(sample(g, t, 10, 16)).toBe(16);
    // t=5: mean 10 ms, g = 1, in flight 16 ≥ 16 − √16: +4.
    expect(sample(g, 5, 10, 16)).toBe(20);
    expect(g.recentRttMs).toBe(10);
    // The next window lasts the last mean RTT, 10 ms: closes at t=15 (+√20 ≈ 4.47).
    for (let t = 6; t <= 14; t++) expect(sample(g, t, 10, 20)).toBe(20);
    expect(sample(g, 15, 10, 20)).toBe(24);
    // 200 ms answers: g = 1.5 × 10 / 200 = 0.075, floored at 0.5: the limit halves, at t=25.
    for (let t = 16; t <= 24; t++) expect(sample(g, t, 200, 24)).toBe(24);
    expect(sample(g, 25, 200, 24)).toBe(12); // 24.47 × 0.5 = 12.24
    expect(g.recentRttMs).toBe(200);
    // The last mean RTT is 200 ms, above maxWindowMs: the window lasts 50 ms, to t=75.
    for (let t = 26; t <= 74; t++) expect(sample(g, t, 200, 12)).toBe(12);
    expect(sample(g, 75, 200, 12)).toBe(6); // 12.24 × 0.5 = 6.12
  });

  it('smoothing takes that share of each step; growth starts at in flight = limit − √limit exactly', () => {
    const g = new GradientLimit({ initial: 16, smoothing: 0.5 });
    sample(g, 0, 10, 12);
    // t=10: g = 1, in flight 12 = 16 − √16: +0.5 × 4.
    expect(sample(g, 10, 10, 12)).toBe(18);
    // t=20: one sample of 60 ms: g = 15 / 60 = 0.25 → 0.5; −0.5 × 18 × 0.5 = −4.5.
    expect(sample(g, 20, 60, 18)).toBe(13);
    const below = new GradientLimit({ initial: 16, smoothing: 0.5 });
    sample(below, 0, 10, 11);
    // In flight 11 < 12: no growth; 11 + 2 × 4 = 19 is not below 16: no step back either.
    expect(sample(below, 10, 10, 11)).toBe(16);
  });

  it('tolerance is the inflation accepted: 1.5 by default, or as given', () => {
    const tolerant = new GradientLimit({ initial: 16, tolerance: 3 });
    sample(tolerant, 0, 10, 16); // minRtt 10
    // t=10: mean (10 + 25) / 2 = 17.5 ≤ 3 × 10: no fall; in flight 16: +4.
    expect(sample(tolerant, 10, 25, 16)).toBe(20);
    const strict = new GradientLimit({ initial: 16 });
    sample(strict, 0, 10, 16);
    // mean 17.5 > 1.5 × 10: g = 15 / 17.5; 16 − 16 × (1 − 6/7) = 13.71.
    expect(sample(strict, 10, 25, 16)).toBe(13);
  });

  it('a request that found no room makes that window grow, and only that window', () => {
    const g = new GradientLimit({ initial: 20 });
    sample(g, 0, 10, 12);
    // 12 in flight: below 20 − √20 ≈ 15.5, so no growth; 12 + 2√20 ≈ 20.9 is not below 20,
    // so no step back either.
    expect(sample(g, 10, 10, 12)).toBe(20);
    sample(g, 15, 10, 12, { limited: true });
    expect(sample(g, 20, 10, 12)).toBe(24); // + √20
    // Later windows are not limited: it steps back toward demand and settles where
    // 12 + 2√L = L (√L = 1 + √13, L ≈ 21.2).
    for (let t = 30; t <= 300; t += 10) sample(g, t, 10, 12);
    expect(g.limit).toBe(21);
  });

  it('a window with a drop backs off by backoffRatio, whatever its other samples', () => {
    const g = new GradientLimit({ initial: 20, backoffRatio: 0.5 });
    sample(g, 0, 10, 20);
    // The first window (minWindowMs, 1 ms) closes at t=5 with a drop: 20 × 0.5.
    expect(sample(g, 5, 10, 20, { dropped: true })).toBe(10);
    // The next window has no drop: it grows again.
    expect(sample(g, 20, 10, 10)).toBe(13); // 10 + √10
  });

  it('defaults: starts at 20, stays within [2, 200]', () => {
    const g = new GradientLimit();
    expect(g.limit).toBe(20);
    for (let t = 0; t < 100; t++) sample(g, t * 10, 10, 1, { dropped: true });
    expect(g.limit).toBe(2);
    for (let t = 1_000; t < 3_000; t += 10) sample(g, t, 10, 1, { limited: true });
    expect(g.limit).toBe(200);
    expect(new GradientLimit({ initial: 1 }).limit).toBe(2);
    expect(new GradientLimit({ initial: 500 }).limit).toBe(200);
  });
});

describe('GradientLimit no-load RTT', () => {
  it('is re-measured at each period end from samples with at most half the limit in flight', () => {
    const g = new GradientLimit({ initial: 20, max: 20, tolerance: 10, minRttPeriodMs: 100 });
    const t0 = 10_000; // the period runs from the first sample, not from 0
    sample(g, t0, 10, 20); // the lowest seen: 10
    sample(g, t0 + 50, 30, 10); // 10 × 2 ≤ 20: unloaded
    sample(g, t0 + 60, 25, 11); // 22 > 20: loaded, not a no-load sample
    sample(g, t0 + 99, 10, 20);
    expect(g.minRttMs).toBe(10);
    sample(g, t0 + 100, 10, 20); // the period ends: its lowest unloaded sample, 30 ms
    expect(g.minRttMs).toBe(30);
    sample(g, t0 + 150, 5, 20); // a lower RTT is taken at once, loaded or not
    expect(g.minRttMs).toBe(5);
  });

  it('a zero mean RTT (a clock that did not move) reads as no inflation', () => {
    const g = new GradientLimit({ initial: 16 });
    sample(g, 0, 0, 16);
    expect(sample(g, 1, 0, 16)).toBe(20);
  });
});

describe('GradientLimit options', () => {
  it('refuses options out of range, naming the option, its range and the value', () => {
    const cases: [GradientLimitOptions, string][] = [
      [{ min: 0 }, 'gradient limit: min must be in [1, ∞), got 0'],
      [{ max: 0.5 }, 'gradient limit: max must be in [1, ∞), got 0.5'],
      [{ initial: 0 }, 'gradient limit: initial must be in [1, ∞), got 0'],
      [{ smoothing: 0 }, 'gradient limit: smoothing must be in (0, 1], got 0'],
      [{ smoothing: 1.5 }, 'gradient limit: smoothing must be in (0, 1], got 1.5'],
      [{ minRttPeriodMs: 0 }, 'gradient limit: minRttPeriodMs must be in (0, ∞), got 0'],
      [{ minWindowMs: -1 }, 'gradient limit: minWindowMs must be in [0, ∞), got -1'],
      [
        { minWindowMs: 10, maxWindowMs: 5 },
        'gradient limit: minWindowMs must be in [0, 5], got 10',
      ],
      [{ maxWindowMs: 0 }, 'gradient limit: maxWindowMs must be in (0, ∞), got 0'],
      [{ backoffRatio: 0.4 }, 'gradient limit: backoffRatio must be in [0.5, 0.999999], got 0.4'],
    ];
    for (const [options, message] of cases) {
      let error: unknown;
      try {
        new GradientLimit(options);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PolicyError);
      expect(error).toMatchObject({ code: 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID', message });
    }
    for (const ok of [
      { min: 5 },
      { max: 5 },
      { minWindowMs: 0, maxWindowMs: 0.5, smoothing: 1, tolerance: 1 },
      { minWindowMs: 7 },
    ]) {
      expect(() => new GradientLimit(ok)).not.toThrow();
    }
  });
});
