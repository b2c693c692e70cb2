import { describe, expect, it } from 'vitest';
import { Deadlines } from '../../src/limiter/deadlines.js';
import { sleep } from '../support/wait.js';

const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('Deadlines', () => {
  it('fires each deadline once its timeout has passed, in the order they were added', async () => {
    const deadlines = new Deadlines();
    const fired: [string, number][] = [];
    const t0 = performance.now();
    for (const name of ['a', 'b', 'c']) {
      deadlines.add(30, () => fired.push([name, performance.now() - t0]));
      await sleep(5);
    }
    await sleep(80);
    expect(fired.map(([n]) => n)).toEqual(['a', 'b', 'c']);
    fired.forEach(([, at], i) => expect(at).toBeGreaterThanOrEqual(30 + 5 * i - 1));
  });

  it('never fires a cleared deadline, and keeps one timer for many pending ones', async () => {
    const before = timers();
    const deadlines = new Deadlines();
    const fired: number[] = [];
    const pending = Array.from({ length: 1_000 }, (_, i) => deadlines.add(40, () => fired.push(i)));
    expect(timers() - before).toBe(1);
    pending.forEach((d, i) => {
      if (i !== 500) d.clear();
    });
    await sleep(80);
    expect(fired).toEqual([500]);
    expect(timers() - before).toBe(0);
  });

  it('stops its timer once every pending deadline is cleared', () => {
    const before = timers();
    const deadlines = new Deadlines();
    const a = deadlines.add(10_000, () => undefined);
    const b = deadlines.add(20_000, () => undefined);
    expect(timers() - before).toBe(2); // one per timeout length
    a.clear();
    b.clear();
    b.clear(); // clearing twice is harmless
    expect(timers() - before).toBe(0);
  });

  it('keeps separate orders for separate timeout lengths', async () => {
    const deadlines = new Deadlines();
    const fired: string[] = [];
    deadlines.add(60, () => fired.push('long'));
    deadlines.add(20, () => fired.push('short'));
    await sleep(100);
    expect(fired).toEqual(['short', 'long']);
  });
});
