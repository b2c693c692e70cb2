import { CRITICALITIES, criticalityRank, type Criticality } from '../core/criticality.js';
import type { Timer } from './timer.js';

/** Why a waiting request left the queue without its turn. */
export type QueueRejection = 'shed' | 'queue-full' | 'queue-timeout' | 'deadline';

/** Options of {@link BoundedQueue}. */
export interface BoundedQueueOptions {
  /** Requests waiting at most. */
  readonly maxSize: number;
  /** Longest wait, in ms. */
  readonly maxWaitMs: number;
  /**
   * Order within one criticality. `lifo` serves the newest first, so under sustained
   * overload the requests that are served have waited least and the old ones time out
   * (Netflix's LifoBlockingLimiter). Across levels the most critical always goes first.
   */
  readonly order: 'fifo' | 'lifo';
  readonly timer: Timer;
}

interface Waiter<T> {
  readonly criticality: Criticality;
  readonly enqueuedMs: number;
  settle(result: T | QueueRejection): void;
  timer: unknown;
}

/**
 * Requests waiting for capacity, bounded by count and by time, one line per criticality.
 *
 * A newcomer whose deadline falls before its estimated turn is refused at once
 * (`deadline`) instead of waiting to fail. When the queue is full, a newcomer more
 * critical than someone waiting takes the place of the least critical waiter (the oldest
 * of that level), who is `shed`; otherwise the newcomer is refused (`queue-full`).
 */
export class BoundedQueue<T> {
  readonly #options: BoundedQueueOptions;
  readonly #lines: Waiter<T>[][] = CRITICALITIES.map(() => []);
  #size = 0;

  constructor(options: BoundedQueueOptions) {
    this.#options = options;
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#size;
  }

  /** Waiters that would be served before a newcomer of level `c`. */
  ahead(c: Criticality): number {
    const rank = criticalityRank(c);
    let n = 0;
    for (let r = 0; r < rank; r++) n += (this.#lines[r] as Waiter<T>[]).length;
    if (this.#options.order === 'fifo') n += (this.#lines[rank] as Waiter<T>[]).length;
    return n;
  }

  /**
   * Queues a request until `grant` is called for it, it times out, or it is shed.
   *
   * @param nowMs now, on the boundary's clock
   * @param deadlineMs the request's own deadline, absolute ms (Infinity for none)
   * @param estimatedWaitMs the estimated wait of this newcomer
   */
  enqueue(
    c: Criticality,
    nowMs: number,
    deadlineMs: number,
    estimatedWaitMs: number,
  ): Promise<T | QueueRejection> {
    if (deadlineMs - nowMs <= estimatedWaitMs) return Promise.resolve('deadline');
    if (this.#size >= this.#options.maxSize && !this.#evictBelow(criticalityRank(c))) {
      return Promise.resolve('queue-full');
    }
    return new Promise<T | QueueRejection>((resolve) => {
      const line = this.#lines[criticalityRank(c)] as Waiter<T>[];
      const waitMs = Math.min(this.#options.maxWaitMs, deadlineMs - nowMs);
      const reason: QueueRejection =
        deadlineMs - nowMs < this.#options.maxWaitMs ? 'deadline' : 'queue-timeout';
      const waiter: Waiter<T> = {
        criticality: c,
        enqueuedMs: nowMs,
        settle: resolve,
        timer: undefined,
      };
      waiter.timer = this.#options.timer.set(() => {
        if (this.#remove(line, waiter)) resolve(reason);
      }, waitMs);
      line.push(waiter);
      this.#size++;
    });
  }

  /** The level of the request that would be served next, if any waits. */
  peek(): Criticality | undefined {
    for (const line of this.#lines) if (line.length > 0) return line[0]?.criticality;
    return undefined;
  }

  /** Serves the next request with `value` (call after `peek`). */
  grantNext(value: T): void {
    for (const line of this.#lines) {
      if (line.length === 0) continue;
      const w = (this.#options.order === 'lifo' ? line.pop() : line.shift()) as Waiter<T>;
      this.#size--;
      this.#options.timer.clear(w.timer);
      w.settle(value);
      return;
    }
  }

  #remove(line: Waiter<T>[], w: Waiter<T>): boolean {
    const i = line.indexOf(w);
    if (i < 0) return false;
    line.splice(i, 1);
    this.#size--;
    return true;
  }

  /** Sheds the oldest waiter of the lowest level below `rank`; false when there is none. */
  #evictBelow(rank: number): boolean {
    for (let r = this.#lines.length - 1; r > rank; r--) {
      const line = this.#lines[r] as Waiter<T>[];
      const w = line.shift();
      if (w === undefined) continue;
      this.#size--;
      this.#options.timer.clear(w.timer);
      w.settle('shed');
      return true;
    }
    return false;
  }
}
