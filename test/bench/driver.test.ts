import { describe, expect, it } from 'vitest';
import { drive } from '../../bench/lib/driver.js';

/** Busy-waits about `ms` (the driver's clock is performance.now()). */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('bench driver', () => {
  it('counts every decision and error, timing one in sampleEvery (sync loop)', async () => {
    let calls = 0;
    const SLOW_MS = 1;
    const r = await drive(
      (i) => {
        calls++;
        if (i % 8 !== 0) spin(SLOW_MS); // only the untimed decisions are slow
        if (i % 5 === 4) throw new Error('boom');
        return i % 2 === 0;
      },
      { concurrency: 1, durationMs: 200, allowed: (v) => v, sync: true, sampleEvery: 8 },
    );
    expect(r.decisions + r.errors).toBe(calls);
    expect(r.errors).toBeGreaterThan(0);
    expect(r.firstError).toBe('boom');
    // The timed decisions (every 8th, some 25 of them) are instant; a slow one takes at
    // least SLOW_MS by construction. Timing the slow ones would put the median of the
    // samples at SLOW_MS or more; instant ones put it below, unless most of them were
    // preempted for a whole SLOW_MS.
    expect(r.latencyUs.p50).toBeLessThan(SLOW_MS * 1_000);
    expect(r.seconds).toBeGreaterThanOrEqual(0.2);
  });

  it('times every decision by default', async () => {
    const r = await drive(
      (i) => {
        if (i % 8 !== 0) spin(0.2);
        return true;
      },
      { concurrency: 1, durationMs: 40, allowed: (v) => v, sync: true },
    );
    expect(r.latencyUs.p50).toBeGreaterThanOrEqual(200);
  });

  it('samples per caller when awaited with concurrency, counting every decision', async () => {
    let calls = 0;
    const r = await drive(
      async () => {
        calls++;
        await Promise.resolve();
        return true;
      },
      { concurrency: 4, durationMs: 30, allowed: (v) => v, sampleEvery: 8 },
    );
    expect(r.decisions).toBe(calls);
    expect(r.allowed).toBe(calls);
  });

  it('refuses a sampleEvery below 1', async () => {
    await expect(
      drive(() => true, { concurrency: 1, durationMs: 1, allowed: () => true, sampleEvery: 0 }),
    ).rejects.toThrow(RangeError);
  });
});
