/**
 * The gradient limit driven sample by sample on a manual clock: one sample per ms, in
 * flight = the limit (saturated) unless a case says otherwise. The limit changes once
 * per window of about one mean RTT. Stated periods, with the defaults (tolerance 1.5, a
 * full step per window): after a 10x latency rise (10 → 100 ms) the limit halves within
 * 2 slow RTTs (200 ms) and reaches its minimum within 5 (500 ms); after the latency
 * returns it is back within 10 % of where it was within 40 healthy RTTs (400 ms).
 */
import { describe, expect, it } from 'vitest';
import { AimdLimit, FixedLimit, GradientLimit } from '../../src/overload.js';

function feed(
  limit: GradientLimit,
  from: number,
  n: number,
  rttMs: number,
  inflight: (l: number) => number = (l) => l,
): number {
  for (let i = 0; i < n; i++) {
    limit.onSample({
      nowMs: from + i,
      rttMs,
      inflight: inflight(limit.limit),
      dropped: false,
      limited: false,
    });
  }
  return from + n;
}

describe('GradientLimit', () => {
  it('falls when latency rises 10x and recovers after, within the stated periods', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 100 });
    let t = feed(g, 0, 300, 10);
    const healthy = g.limit;
    // Saturated at a steady 10 ms: g = 1, +√L per 10 ms window up to max.
    expect(healthy).toBe(100);
    t = feed(g, t, 200, 100);
    // Each window: g = 1.5 × 10 / (window mean) ≤ 0.5 once the mean passes 30 ms.
    expect(g.limit).toBeLessThanOrEqual(healthy / 2);
    t = feed(g, t, 300, 100);
    expect(g.limit).toBe(2);
    t = feed(g, t, 500, 100); // a long slowdown: it stays at the minimum
    expect(g.limit).toBe(2);
    // Latency returns: +√L per 10 ms window: 2 → 90 in about 2·(√90 − √2) ≈ 16 windows
    // once the first healthy window closes (the last slow window lasts up to 100 ms).
    feed(g, t, 400, 10);
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
      g.onSample({ nowMs: 20 + i, rttMs: 17, inflight: g.limit, dropped: false, limited: false });
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
    g.onSample({ nowMs: 0, rttMs: 10, inflight: 1, dropped: false, limited: false });
    // 60 s of loaded samples at 20 ms (in flight = the limit): six periods end, none
    // had an unloaded sample, so the estimate stays at 10 ms.
    for (let t = 1; t <= 60_000; t += 10) {
      g.onSample({ nowMs: t, rttMs: 20, inflight: g.limit, dropped: false, limited: false });
    }
    expect(g.minRttMs).toBe(10);
    // At low load (1 in flight) the baseline really is 20 ms now: after one period the
    // estimate follows it.
    for (let t = 60_001; t <= 80_001; t += 10) {
      g.onSample({ nowMs: t, rttMs: 20, inflight: 1, dropped: false, limited: false });
    }
    expect(g.minRttMs).toBe(20);
  });

  it("a window with a drop backs off by 0.9, and the drop's RTT is not read as fast (Netflix #176)", () => {
    const g = new GradientLimit({ initial: 50, min: 2, max: 200 });
    let t = feed(g, 0, 30, 10); // windows of 10 ms at 10 ms, saturated: it grows
    const before = g.limit;
    g.onSample({ nowMs: t++, rttMs: 0, inflight: before, dropped: true, limited: false });
    feed(g, t, 10, 10); // the window closes: the drop wins over growth
    // before ≤ L < before + 1, so the backed-off limit is floor(L × 0.9):
    expect(g.limit).toBeGreaterThanOrEqual(Math.floor(before * 0.9));
    expect(g.limit).toBeLessThanOrEqual(Math.floor((before + 1) * 0.9));
    expect(g.minRttMs).toBe(10);
  });

  it('steps back toward demand, by at most √limit per window, when in flight stays 2·√limit below it', () => {
    const g = new GradientLimit({ initial: 50, min: 2, max: 200 });
    let previous = g.limit;
    let t = 0;
    for (let w = 0; w < 100; w++) {
      t = feed(g, t, 10, 10, () => 2);
      expect(previous - g.limit).toBeLessThanOrEqual(Math.ceil(Math.sqrt(previous)));
      previous = g.limit;
    }
    // Settles where 2 + 2·√L = L: √L = 1 + √3, L ≈ 7.46 (demand plus headroom, not 50).
    expect(g.limit).toBe(7);
  });

  it('grows only when demand reaches it: in flight within √limit of it, or a request found no room', () => {
    const g = new GradientLimit({ initial: 20, min: 2, max: 200 });
    // 15 in flight < 20 − √20 ≈ 15.5: the limit is not what holds traffic back.
    let t = feed(g, 0, 500, 10, () => 15);
    expect(g.limit).toBe(20);
    // Requests queued (criticality ceilings can keep in-flight low while they wait).
    g.onSample({ nowMs: t++, rttMs: 10, inflight: 15, dropped: false, limited: true });
    feed(g, t, 10, 10, () => 15);
    expect(g.limit).toBe(24); // 20 + √20
  });
});

describe('AimdLimit', () => {
  it('+1 per good sample while in use, ×0.9 per drop or per sample over the timeout', () => {
    const a = new AimdLimit({ initial: 10, min: 1, max: 12, timeoutMs: 100 });
    const sample = (rttMs: number, dropped = false, inflight = 10) =>
      a.onSample({ nowMs: 0, rttMs, inflight, dropped, limited: false });
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

describe('limit algorithms built in code', () => {
  it('refuse options out of range, naming the option', () => {
    expect(() => new GradientLimit({ tolerance: 0.5 })).toThrow(
      'gradient limit: tolerance must be in [1, ∞), got 0.5',
    );
    expect(() => new GradientLimit({ min: 10, max: 5 })).toThrow(
      'gradient limit: min must be in [1, 5], got 10',
    );
    expect(() => new AimdLimit({ backoffRatio: 1 })).toThrow(
      'AIMD limit: backoffRatio must be in [0.5, 0.999999], got 1',
    );
    expect(() => new FixedLimit(2.5)).toThrow(
      'fixed limit: limit must be a whole number >= 1, got 2.5',
    );
  });
});
