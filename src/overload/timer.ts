import type { ManualClock } from '../core/clock.js';

/** Schedules callbacks; injected so that queue waits run on a manual clock in tests. */
export interface Timer {
  set(callback: () => void, delayMs: number): unknown;
  clear(handle: unknown): void;
}

/** `setTimeout` / `clearTimeout`, unref'd so that a waiting request never holds the process open. */
export const systemTimer: Timer = {
  set(callback, delayMs) {
    const t = setTimeout(callback, delayMs);
    t.unref();
    return t;
  },
  clear(handle) {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/**
 * A timer driven by a {@link ManualClock}: callbacks run when `advance` moves the clock
 * past their due time, in due order.
 */
export class ManualTimer implements Timer {
  readonly #clock: ManualClock;
  #next = 0;
  readonly #due = new Map<number, { atMs: number; callback: () => void }>();

  constructor(clock: ManualClock) {
    this.#clock = clock;
  }

  set(callback: () => void, delayMs: number): unknown {
    const id = this.#next++;
    this.#due.set(id, { atMs: this.#clock.nowMs() + Math.max(0, delayMs), callback });
    return id;
  }

  clear(handle: unknown): void {
    this.#due.delete(handle as number);
  }

  /** Timers not yet run. */
  get pending(): number {
    return this.#due.size;
  }

  /** Moves the clock by `deltaMs`, running each timer due on the way at its due time. */
  advance(deltaMs: number): void {
    const end = this.#clock.nowMs() + deltaMs;
    for (;;) {
      let first: [number, { atMs: number; callback: () => void }] | undefined;
      for (const e of this.#due) if (first === undefined || e[1].atMs < first[1].atMs) first = e;
      if (first === undefined || first[1].atMs > end) break;
      this.#due.delete(first[0]);
      this.#clock.set(Math.max(this.#clock.nowMs(), first[1].atMs));
      first[1].callback();
    }
    this.#clock.set(end);
  }
}
