/**
 * The client-side adaptive throttle on a manual clock: the refusal probability
 * max(0, (requests − K × accepts) / (requests + 1)), capped, over a sliding window.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import { ClientThrottle, type ClientThrottleOptions } from '../../src/overload.js';

/** `n` attempts, every one sent (random 0.999… clears any p below 1), `accepts` of them accepted. */
function traffic(t: ClientThrottle, n: number, accepts: number): void {
  for (let i = 0; i < n; i++) {
    t.allow(0.999_999);
    if (i < accepts) t.accepted();
  }
}

describe('ClientThrottle', () => {
  it('p = (requests − K × accepts) / (requests + 1), never below 0', () => {
    const clock = new ManualClock(0);
    const t = new ClientThrottle({ k: 2, maxRejectProbability: 1, clock });
    expect(t.rejectProbability()).toBe(0);
    traffic(t, 10, 2);
    expect(t.rejectProbability()).toBe((10 - 2 * 2) / (10 + 1)); // 6/11
    const k = new ClientThrottle({ k: 1.5, maxRejectProbability: 1, clock });
    traffic(k, 10, 2);
    expect(k.rejectProbability()).toBe((10 - 1.5 * 2) / 11); // 7/11
    const healthy = new ClientThrottle({ clock });
    traffic(healthy, 10, 10); // (10 − 20) / 11 < 0
    expect(healthy.rejectProbability()).toBe(0);
  });

  it('is capped at maxRejectProbability (default 0.9)', () => {
    const clock = new ManualClock(0);
    const capped = new ClientThrottle({ clock });
    traffic(capped, 100, 0); // 100/101 > 0.9
    expect(capped.rejectProbability()).toBe(0.9);
    const half = new ClientThrottle({ maxRejectProbability: 0.5, clock });
    traffic(half, 100, 0);
    expect(half.rejectProbability()).toBe(0.5);
  });

  it('allow sends when random ≥ p, decided on the counts before this attempt, and counts it', () => {
    const clock = new ManualClock(0);
    const t = new ClientThrottle({ k: 2, maxRejectProbability: 1, clock });
    expect(t.allow(0)).toBe(true); // p = 0 before any attempt: even random 0 is sent
    // One attempt, no accepts: p = 1/2.
    expect(t.rejectProbability()).toBe(0.5);
    expect(t.allow(0.5)).toBe(true); // random = p: sent
    // Two attempts: p = 2/3.
    expect(t.allow(0.5)).toBe(false); // random < p: refused, and still counted
    expect(t.rejectProbability()).toBe(3 / 4);
    t.accepted();
    expect(t.rejectProbability()).toBe((3 - 2) / 4);
  });

  it('default K is 2 and the default window 120 s in 12 slices', () => {
    const clock = new ManualClock(0);
    const t = new ClientThrottle({ maxRejectProbability: 1, clock });
    traffic(t, 10, 3);
    expect(t.rejectProbability()).toBe((10 - 2 * 3) / 11);
    clock.set(119_999); // slice 11 of 10 s: slice 0 still counts
    expect(t.rejectProbability()).toBe(4 / 11);
    clock.set(120_000);
    expect(t.rejectProbability()).toBe(0);
  });

  it('counts slide out of the window by slices of windowMs / buckets', () => {
    const clock = new ManualClock(400);
    // Slices of 500 ms: attempts at 400 ms sit in slice 0 and leave at 1000 ms. With the
    // default 12 slices (83 ms) they would sit in slice 4 and stay until 1333 ms.
    const t = new ClientThrottle({ windowMs: 1_000, buckets: 2, maxRejectProbability: 1, clock });
    traffic(t, 3, 0);
    expect(t.rejectProbability()).toBe(3 / 4);
    clock.set(999);
    expect(t.rejectProbability()).toBe(3 / 4);
    clock.set(1_000);
    expect(t.rejectProbability()).toBe(0);
  });

  it('refuses options out of range, naming the option, its range and the value', () => {
    const cases: [ClientThrottleOptions, string][] = [
      [{ k: 0.9 }, 'adaptive throttle: k must be in [1, ∞), got 0.9'],
      [{ windowMs: 0 }, 'adaptive throttle: windowMs must be in (0, ∞), got 0'],
      [{ buckets: 0 }, 'adaptive throttle: buckets must be in [1, 10000], got 0'],
      [{ buckets: 10_001 }, 'adaptive throttle: buckets must be in [1, 10000], got 10001'],
      [
        { maxRejectProbability: 1.1 },
        'adaptive throttle: maxRejectProbability must be in [0, 1], got 1.1',
      ],
      [
        { maxRejectProbability: -0.1 },
        'adaptive throttle: maxRejectProbability must be in [0, 1], got -0.1',
      ],
    ];
    for (const [options, message] of cases) {
      let error: unknown;
      try {
        new ClientThrottle(options);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PolicyError);
      expect(error).toMatchObject({ code: 'SLUICE_ERR_OVERLOAD_CONFIG_INVALID', message });
    }
    expect(
      () => new ClientThrottle({ k: 1, buckets: 1, maxRejectProbability: 0, windowMs: 1 }),
    ).not.toThrow();
    expect(() => new ClientThrottle({ buckets: 10_000, maxRejectProbability: 1 })).not.toThrow();
  });
});
