/**
 * Log lines a peer can cause, sampled: at most one line per key (a reason) per interval,
 * each carrying how many lines of that key were left out since the last one. A peer
 * that opens streams in a loop then costs a line per interval, not a line per stream.
 */
export class SampledLog {
  readonly #log: (event: Record<string, unknown>) => void;
  readonly #intervalMs: number;
  readonly #now: () => number;
  /** Per key: when its last line was written, and the lines left out since. */
  readonly #keys = new Map<string, { atMs: number; suppressed: number }>();

  constructor(
    log: (event: Record<string, unknown>) => void,
    intervalMs: number,
    now: () => number,
  ) {
    this.#log = log;
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  /** Writes `event` unless a line of `key` was written less than the interval ago. */
  write(key: string, event: Record<string, unknown>): void {
    const nowMs = this.#now();
    const k = this.#keys.get(key);
    if (k !== undefined && nowMs - k.atMs < this.#intervalMs) {
      k.suppressed++;
      return;
    }
    this.#log({ ...event, suppressed: k?.suppressed ?? 0 });
    this.#keys.set(key, { atMs: nowMs, suppressed: 0 });
  }
}
