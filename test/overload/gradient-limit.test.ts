/**
 * The gradient limit driven sample by sample on a manual clock (one sample per ms,
 * in flight = the limit, i.e. saturated, unless a case says otherwise). Periods are
 * stated in samples: with the defaults (tolerance 1.5, smoothing 0.2, recent RTT over
 * 10 samples) a 10× latency rise halves the limit within 10 samples, and after the
 * latency returns the limit is back within 10 % of where it was within 200 samples.
 */
import { describe, expect, it } from 'vitest';
import { AimdLimit, GradientLimit } from '../../src/overload.js';

function feed(
  limit: GradientLimit,
  from: number,
  n: number,
  rttMs: number,
  inflight: (l: number) => number = (l) => l,
): number {
  for (let i = 0; i < n; i++) {
    limit.onSample({ nowMs: from + i, rttMs, inflight: inflight(limit.limit), dropped: false });
  }
  return from + n;
}

describe('GradientLimit', () => {
  it('falls when latency rises 10x and recovers after, within the stated periods', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 100 });
    let t = feed(g, 0, 300, 10);
    const healthy = g.limit;
    // Saturated at a steady 10 ms: g = 1 and it grows by 0.2·√L per sample up to max.
    expect(healthy).toBe(100);
    t = feed(g, t, 10, 100);
    // 1st slow sample: recent = 10 + 90·2/11 = 26.4 → g = 15/26.4 = 0.57 → ×0.914; then
    // g is clamped at 0.5 → ×0.9 per sample: 100 × 0.914 × 0.9^9 ≈ 35.
    expect(g.limit).toBeLessThanOrEqual(healthy / 2);
    t = feed(g, t, 100, 100);
    expect(g.limit).toBe(2);
    // Latency returns: recent falls below 15 ms after about 15 samples, then the limit
    // grows by 0.2·√L per sample: 2 → 90 in about 10·(√90 − √2) ≈ 81 samples.
    feed(g, t, 200, 10);
    expect(g.limit).toBeGreaterThanOrEqual(0.9 * healthy);
  });

  it('under modest overload (recent RTT between 1x and 2x tolerance) it only falls: no growth from headroom', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 200 });
    feed(g, 0, 20, 10); // minRtt = 10 ms
    // 17 ms: once the recent RTT passes 15 ms (tolerance × minRtt), g = 15/17 ≈ 0.88 and
    // the limit never grows again; Gradient2's `L·g + 4` grows for L < 34 (Netflix #134/#189).
    let previous = Infinity;
    let inflated = 0;
    for (let i = 0; i < 1000; i++) {
      g.onSample({ nowMs: 20 + i, rttMs: 17, inflight: g.limit, dropped: false });
      if ((g.recentRttMs ?? 0) <= 15) continue;
      inflated++;
      expect(g.limit).toBeLessThanOrEqual(previous);
      previous = g.limit;
    }
    expect(inflated).toBeGreaterThan(980);
    expect(g.limit).toBe(2);
  });

  it('the no-load RTT does not creep up under load (Envoy #11579), and follows a real change at low load', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 200, minRttPeriodMs: 10_000 });
    g.onSample({ nowMs: 0, rttMs: 10, inflight: 1, dropped: false });
    // 60 s of loaded samples at 20 ms (in flight = the limit): six periods end, none
    // had an unloaded sample, so the estimate stays at 10 ms.
    for (let t = 1; t <= 60_000; t += 10) {
      g.onSample({ nowMs: t, rttMs: 20, inflight: g.limit, dropped: false });
    }
    expect(g.minRttMs).toBe(10);
    // At low load (1 in flight) the baseline really is 20 ms now: after one period the
    // estimate follows it.
    for (let t = 60_001; t <= 80_001; t += 10) {
      g.onSample({ nowMs: t, rttMs: 20, inflight: 1, dropped: false });
    }
    expect(g.minRttMs).toBe(20);
  });

  it('a drop backs off and its RTT is not read as fast (Netflix #176)', () => {
    const g = new GradientLimit({ initial: 50, min: 2, max: 200 });
    feed(g, 0, 5, 10);
    const before = g.limit;
    g.onSample({ nowMs: 10, rttMs: 0, inflight: before, dropped: true });
    expect(g.limit).toBe(Math.floor(before * 0.9));
    expect(g.minRttMs).toBe(10);
  });

  it('does not grow while less than half of it is in use', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 200 });
    feed(g, 0, 500, 10, () => 9);
    expect(g.limit).toBe(20);
  });
});

describe('AimdLimit', () => {
  it('+1 per good sample while in use, ×0.9 per drop or per sample over the timeout', () => {
    const a = new AimdLimit({ initial: 10, min: 1, max: 12, timeoutMs: 100 });
    const sample = (rttMs: number, dropped = false, inflight = 10) =>
      a.onSample({ nowMs: 0, rttMs, inflight, dropped });
    sample(5);
    expect(a.limit).toBe(11);
    sample(5, false, 4); // 4·2 < 11: idle, no growth
    expect(a.limit).toBe(11);
    sample(5);
    sample(5);
    expect(a.limit).toBe(12); // max
    sample(101); // slower than the timeout: 12 × 0.9 = 10.8
    expect(a.limit).toBe(10);
    sample(5, true); // 10.8 × 0.9 = 9.72
    expect(a.limit).toBe(9);
  });
});
