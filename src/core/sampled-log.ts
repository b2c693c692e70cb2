import type { Clock } from './clock.js';

/**
 * A log that writes at most one line per key per interval, for events a peer can cause
 * at any rate (refused messages, unknown buckets): the first line of an interval is
 * written at once; later ones in the same interval are only counted, and the count comes
 * out as `suppressed` on one line at the interval's end, with the last event's fields.
 */
export class SampledLog {
  readonly #log: (event: Record<string, unknown>) => void;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #keys = new Map<
    string,
    { lastMs: number; suppressed: number; last?: Record<string, unknown>; timer?: NodeJS.Timeout }
  >();

  constructor(log: (event: Record<string, unknown>) => void, intervalMs: number, clock: Clock) {
    this.#log = log;
    this.#intervalMs = intervalMs;
    this.#clock = clock;
  }

  /** Logs `event` under `key` (one of a small fixed set), or counts it. */
  note(key: string, event: Record<string, unknown>): void {
    const nowMs = this.#clock.nowMs();
    const k = this.#keys.get(key);
    if (k === undefined || nowMs - k.lastMs >= this.#intervalMs) {
      if (k?.timer !== undefined) clearTimeout(k.timer);
      const suppressed = k?.suppressed ?? 0;
      this.#keys.set(key, { lastMs: nowMs, suppressed: 0 });
      this.#log(suppressed > 0 ? { ...event, suppressed } : event);
      return;
    }
    k.suppressed++;
    k.last = event;
    // Unref'd: a count still pending never keeps the process alive.
    k.timer ??= setTimeout(
      () => {
        const left = this.#keys.get(key);
        if (left !== k) return;
        this.#keys.set(key, { lastMs: this.#clock.nowMs(), suppressed: 0 });
        this.#log({ ...k.last, suppressed: k.suppressed });
      },
      Math.max(0, k.lastMs + this.#intervalMs - nowMs),
    ).unref();
  }

  /** Writes what is still counted, and stops the timers. */
  flush(): void {
    for (const [key, k] of this.#keys) {
      if (k.timer !== undefined) clearTimeout(k.timer);
      if (k.suppressed > 0) this.#log({ ...k.last, suppressed: k.suppressed });
      this.#keys.delete(key);
    }
  }
}
