/**
 * Counts over a sliding time window, kept in `buckets` slices: a count older than the
 * window drops out one slice at a time. Used by the breaker, the client throttle and the
 * retry budget. Time moves only forwards here: a `nowMs` earlier than the latest seen is
 * treated as the latest.
 */
export class WindowCounter<K extends string> {
  readonly #fields: readonly K[];
  readonly #sliceMs: number;
  readonly #epochs: number[];
  readonly #counts: number[][];
  #latestSlice = -Infinity;

  /**
   * @param fields the counted quantities
   * @param windowMs the window, in ms (> 0)
   * @param buckets slices per window (≥ 1); more slices, a smoother slide
   */
  constructor(fields: readonly K[], windowMs: number, buckets: number) {
    this.#fields = fields;
    this.#sliceMs = windowMs / buckets;
    this.#epochs = new Array<number>(buckets).fill(-Infinity);
    this.#counts = Array.from({ length: buckets }, () => new Array<number>(fields.length).fill(0));
  }

  #slice(nowMs: number): number {
    const s = Math.max(this.#latestSlice, Math.floor(nowMs / this.#sliceMs));
    this.#latestSlice = s;
    return s;
  }

  /** Adds `by` to `field` at `nowMs`. */
  add(nowMs: number, field: K, by = 1): void {
    const s = this.#slice(nowMs);
    const i = s % this.#epochs.length;
    const counts = this.#counts[i] as number[];
    if (this.#epochs[i] !== s) {
      this.#epochs[i] = s;
      counts.fill(0);
    }
    counts[this.#fields.indexOf(field)] = (counts[this.#fields.indexOf(field)] ?? 0) + by;
  }

  /** Every field's total over the window ending at `nowMs`. */
  totals(nowMs: number): Record<K, number> {
    const s = this.#slice(nowMs);
    const out = Object.fromEntries(this.#fields.map((f) => [f, 0])) as Record<K, number>;
    for (let i = 0; i < this.#epochs.length; i++) {
      if ((this.#epochs[i] as number) <= s - this.#epochs.length) continue;
      const counts = this.#counts[i] as number[];
      this.#fields.forEach((f, j) => (out[f] += counts[j] as number));
    }
    return out;
  }

  /** Forgets every count. */
  reset(): void {
    this.#epochs.fill(-Infinity);
  }
}
