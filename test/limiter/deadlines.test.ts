import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Deadlines } from '../../src/limiter/deadlines.js';

/**
 * Fake timers and a fake `performance.now()`, scoped to each test: vi.getTimerCount() counts
 * only the timers this file's code armed (vitest's own timers, which a process-wide count
 * saw come and go, keep the real functions), and time moves only when the test says so.
 */
describe('Deadlines (fake timers)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires each deadline once its timeout has passed, in the order they were added', () => {
    const deadlines = new Deadlines();
    const fired: [string, number][] = [];
    const t0 = performance.now();
    for (const name of ['a', 'b', 'c']) {
      deadlines.add(30, () => fired.push([name, performance.now() - t0]));
      vi.advanceTimersByTime(5);
    }
    // Added at 0, 5 and 10 ms: due at 30, 35 and 40 ms; now is 15 ms.
    vi.advanceTimersByTime(14);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([['a', 30]]);
    vi.advanceTimersByTime(10);
    expect(fired).toEqual([
      ['a', 30],
      ['b', 35],
      ['c', 40],
    ]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never fires a cleared deadline, and keeps one timer for many pending ones', () => {
    const deadlines = new Deadlines();
    const fired: number[] = [];
    const pending = Array.from({ length: 1_000 }, (_, i) => deadlines.add(40, () => fired.push(i)));
    expect(vi.getTimerCount()).toBe(1);
    pending.forEach((d, i) => {
      if (i !== 500) d.clear();
    });
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(40);
    expect(fired).toEqual([500]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('re-arms for the oldest pending deadline after the one its timer was for is cleared', () => {
    const deadlines = new Deadlines();
    const fired: string[] = [];
    const first = deadlines.add(30, () => fired.push('first'));
    vi.advanceTimersByTime(10);
    deadlines.add(30, () => fired.push('second')); // due at 40 ms
    first.clear();
    vi.advanceTimersByTime(20); // 30 ms: the timer armed for `first` finds nothing due
    expect(fired).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(9);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(['second']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stops its timer once every pending deadline is cleared', () => {
    const deadlines = new Deadlines();
    const fired: string[] = [];
    const a = deadlines.add(10_000, () => fired.push('a'));
    const b = deadlines.add(20_000, () => fired.push('b'));
    expect(vi.getTimerCount()).toBe(2); // one per timeout length
    a.clear();
    b.clear();
    b.clear(); // clearing twice is harmless
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(30_000);
    expect(fired).toEqual([]);
  });

  it('arms its timer for the due instant of the oldest deadline, not sooner', () => {
    const deadlines = new Deadlines();
    deadlines.add(30, () => undefined);
    vi.advanceTimersToNextTimer();
    expect(performance.now()).toBe(30);
  });

  it('gives a deadline added by an expiring one of the same length one timer', () => {
    const deadlines = new Deadlines();
    const fired: string[] = [];
    deadlines.add(30, () => {
      fired.push('first');
      deadlines.add(30, () => fired.push('second'));
    });
    vi.advanceTimersByTime(30);
    expect(fired).toEqual(['first']);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(30);
    expect(fired).toEqual(['first', 'second']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('shares one timer per timeout length, and starts over past 64 lengths', () => {
    const deadlines = new Deadlines();
    deadlines.add(10_000, () => undefined);
    deadlines.add(20_000, () => undefined);
    deadlines.add(10_000, () => undefined);
    expect(vi.getTimerCount()).toBe(2);
    for (let ms = 1; ms <= 62; ms++) deadlines.add(ms, () => undefined);
    expect(vi.getTimerCount()).toBe(64); // 64 lengths, one timer each
    deadlines.add(10_000, () => undefined); // a known length: its queue's timer serves it
    expect(vi.getTimerCount()).toBe(64);
    deadlines.add(63, () => undefined); // a 65th length: the map starts over
    deadlines.add(10_000, () => undefined); // so a known length gets a new queue and timer
    expect(vi.getTimerCount()).toBe(66);
  });

  it('keeps separate orders for separate timeout lengths', () => {
    const deadlines = new Deadlines();
    const fired: string[] = [];
    deadlines.add(60, () => fired.push('long'));
    deadlines.add(20, () => fired.push('short'));
    vi.advanceTimersByTime(20);
    expect(fired).toEqual(['short']);
    vi.advanceTimersByTime(40);
    expect(fired).toEqual(['short', 'long']);
  });
});

describe('Deadlines (real timers)', () => {
  it('fires through the real setTimeout, never before its timeout', async () => {
    const deadlines = new Deadlines();
    const waited: [number, number][] = [];
    await Promise.all(
      [30, 20, 10].map((timeoutMs) => {
        const addedAt = performance.now();
        return new Promise<void>((resolve) =>
          deadlines.add(timeoutMs, () => {
            waited.push([timeoutMs, performance.now() - addedAt]);
            resolve();
          }),
        );
      }),
    );
    // Due once its instant is within 0.5 ms (timers may fire a little early).
    expect(waited.map(([timeoutMs]) => timeoutMs).sort((a, b) => a - b)).toEqual([10, 20, 30]);
    for (const [timeoutMs, ms] of waited) expect(ms).toBeGreaterThanOrEqual(timeoutMs - 0.5);
  });
});
