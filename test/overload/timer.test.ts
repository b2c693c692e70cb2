/** ManualTimer (due order, the clock at each callback, clear) and systemTimer (unref'd setTimeout). */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { ManualTimer, systemTimer } from '../../src/overload.js';

describe('ManualTimer', () => {
  it('runs each callback when the clock passes its due time, in due order, with the clock at that time', () => {
    const clock = new ManualClock(100);
    const timer = new ManualTimer(clock);
    const ran: string[] = [];
    const at = (name: string) => () => ran.push(`${name}@${clock.nowMs()}`);
    timer.set(at('c'), 30);
    timer.set(at('a'), 10);
    timer.set(at('b'), 10); // due with a: runs after it, in the order set
    timer.set(at('now'), -5); // a negative delay is due now
    expect(timer.pending).toBe(4);
    timer.advance(9);
    expect(ran).toEqual(['now@100']);
    timer.advance(1); // exactly at 110: due, so it runs
    expect(ran).toEqual(['now@100', 'a@110', 'b@110']);
    timer.advance(50);
    expect(ran).toEqual(['now@100', 'a@110', 'b@110', 'c@130']);
    expect(clock.nowMs()).toBe(160);
    expect(timer.pending).toBe(0);
  });

  it('a cleared timer never runs; a timer set inside a callback runs in the same advance when due', () => {
    const clock = new ManualClock(0);
    const timer = new ManualTimer(clock);
    const ran: number[] = [];
    const h = timer.set(() => ran.push(1), 10);
    timer.set(() => {
      ran.push(2);
      timer.set(() => ran.push(3), 5);
    }, 10);
    timer.clear(h);
    expect(timer.pending).toBe(1);
    timer.advance(20);
    expect(ran).toEqual([2, 3]);
    expect(clock.nowMs()).toBe(20);
  });
});

describe('systemTimer', () => {
  it("runs the callback on Node's timers, unref'd, and clear cancels it", async () => {
    const ran: string[] = [];
    const cleared = systemTimer.set(() => ran.push('cleared'), 1);
    systemTimer.clear(cleared);
    const handle = systemTimer.set(() => undefined, 60_000);
    expect((handle as NodeJS.Timeout).hasRef()).toBe(false);
    systemTimer.clear(handle);
    // Timers of one delay run in the order set: this one runs after `cleared` would have.
    await new Promise<void>((resolve) => systemTimer.set(resolve, 1));
    expect(ran).toEqual([]);
  });
});
