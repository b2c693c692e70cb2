/**
 * BoundedQueue on its own, on a manual clock and timer: who is ahead, the deadline and
 * maxWait edges, eviction order, and serving order. test/overload/admission-boundary.test.ts
 * drives it through the boundary.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  BoundedQueue,
  ManualTimer,
  type BoundedQueueOptions,
  type Criticality,
} from '../../src/overload.js';

function setup(options: Partial<BoundedQueueOptions> = {}) {
  const clock = new ManualClock(1_000);
  const timer = new ManualTimer(clock);
  const queue = new BoundedQueue<string>({
    maxSize: 10,
    maxWaitMs: 100,
    order: 'fifo',
    timer,
    ...options,
  });
  const results: string[] = [];
  /** Queues `name` at level `c`; its result lands in `results` as `name:result`. */
  const wait = (name: string, c: Criticality, deadlineMs = Infinity, estimateMs = 0) =>
    void queue
      .enqueue(c, clock.nowMs(), deadlineMs, estimateMs)
      .then((r) => results.push(`${name}:${r}`));
  return { clock, timer, queue, results, wait };
}

/** Settles pending promise callbacks. */
const flush = () => new Promise<void>((r) => setImmediate(r));

describe('BoundedQueue', () => {
  it('ahead counts the more critical waiters, and the same level too only in FIFO order', () => {
    for (const order of ['fifo', 'lifo'] as const) {
      const { queue, wait } = setup({ order });
      wait('a', 'CRITICAL_PLUS');
      wait('b', 'CRITICAL');
      wait('c', 'CRITICAL');
      wait('d', 'SHEDDABLE');
      const same = order === 'fifo' ? 1 : 0;
      expect([order, queue.size]).toEqual([order, 4]);
      expect(queue.ahead('CRITICAL_PLUS')).toBe(same * 1);
      expect(queue.ahead('CRITICAL')).toBe(1 + same * 2);
      expect(queue.ahead('SHEDDABLE_PLUS')).toBe(3);
      expect(queue.ahead('SHEDDABLE')).toBe(3 + same * 1);
    }
  });

  it('a deadline at or before the estimated turn is refused at once; one just after it waits', async () => {
    const { queue, clock, timer, results, wait } = setup();
    const now = clock.nowMs();
    expect(await queue.enqueue('CRITICAL', now, now + 25, 25)).toBe('deadline');
    expect(queue.size).toBe(0);
    expect(timer.pending).toBe(0);
    wait('w', 'CRITICAL', now + 26, 25);
    expect(queue.size).toBe(1);
    timer.advance(26); // it waits until its deadline, which comes before maxWait
    await flush();
    expect(results).toEqual(['w:deadline']);
  });

  it('waits maxWait at most: refused as queue-timeout at maxWait, as deadline before it', async () => {
    const { results, timer, wait, clock } = setup({ maxWaitMs: 100 });
    wait('atMax', 'CRITICAL', clock.nowMs() + 100); // deadline = maxWait: the wait ends as a timeout
    wait('later', 'CRITICAL', clock.nowMs() + 500);
    wait('sooner', 'CRITICAL', clock.nowMs() + 99);
    timer.advance(98);
    await flush();
    expect(results).toEqual([]);
    timer.advance(1);
    await flush();
    expect(results).toEqual(['sooner:deadline']);
    timer.advance(1);
    await flush();
    expect(results).toEqual(['sooner:deadline', 'atMax:queue-timeout', 'later:queue-timeout']);
  });

  it('full: a more critical newcomer sheds the oldest waiter of the lowest level; an equal or lower one is refused', async () => {
    const { queue, results, wait, timer } = setup({ maxSize: 3, order: 'lifo' });
    wait('s1', 'SHEDDABLE');
    wait('s2', 'SHEDDABLE');
    wait('p1', 'SHEDDABLE_PLUS');
    expect(await queue.enqueue('SHEDDABLE', 0, Infinity, 0)).toBe('queue-full');
    wait('c1', 'CRITICAL'); // sheds s1, the oldest SHEDDABLE (LIFO serves the newest, not evicts it)
    await flush();
    expect(results).toEqual(['s1:shed']);
    expect(queue.size).toBe(3);
    wait('p2', 'SHEDDABLE_PLUS'); // sheds s2: below SHEDDABLE_PLUS
    await flush();
    expect(results).toEqual(['s1:shed', 's2:shed']);
    expect(await queue.enqueue('SHEDDABLE', 0, Infinity, 0)).toBe('queue-full');
    expect(await queue.enqueue('SHEDDABLE_PLUS', 0, Infinity, 0)).toBe('queue-full');
    expect(queue.size).toBe(3);
    // The evicted waiters' timers are gone: only the three still waiting have one.
    expect(timer.pending).toBe(3);
  });

  it('serves the most critical level first; FIFO or LIFO within it; a served waiter never times out', async () => {
    for (const order of ['fifo', 'lifo'] as const) {
      const { queue, results, wait, timer } = setup({ order });
      wait('s1', 'SHEDDABLE');
      wait('c1', 'CRITICAL');
      wait('c2', 'CRITICAL');
      expect(queue.peek()).toBe('CRITICAL');
      queue.grantNext('x');
      queue.grantNext('y');
      expect(queue.peek()).toBe('SHEDDABLE');
      queue.grantNext('z');
      expect(queue.peek()).toBeUndefined();
      queue.grantNext('none'); // nobody waits: nothing happens
      expect(queue.size).toBe(0);
      expect(timer.pending).toBe(0);
      timer.advance(1_000);
      await flush();
      expect(results).toEqual(
        order === 'fifo' ? ['c1:x', 'c2:y', 's1:z'] : ['c2:x', 'c1:y', 's1:z'],
      );
    }
  });

  it('a timed-out waiter leaves its line: the others keep their place and size counts only those left', async () => {
    const { queue, results, wait, timer, clock } = setup({ maxWaitMs: 100 });
    wait('a', 'CRITICAL');
    clock.advance(10);
    wait('b', 'CRITICAL');
    wait('c', 'CRITICAL', clock.nowMs() + 50); // in the middle of the line
    timer.advance(50);
    await flush();
    expect(results).toEqual(['c:deadline']);
    expect(queue.size).toBe(2);
    queue.grantNext('x');
    queue.grantNext('y');
    await flush();
    expect(results).toEqual(['c:deadline', 'a:x', 'b:y']);
  });
});
