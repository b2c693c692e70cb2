/** One entry of {@link TopK.top}. */
export interface TopEntry<T> {
  /** The tracked item (as given to `add`). */
  readonly item: string;
  /** What was recorded with it the first time it entered the table. */
  readonly tag: T;
  /** Estimated count (an upper bound). */
  readonly count: number;
  /** How much of `count` may belong to items it displaced: `count - error` is a lower bound. */
  readonly error: number;
}

/**
 * The space-saving top-k (Metwally, Agrawal and El Abbadi, 2005), as `HotKeys` in the
 * Redis store uses it, with a tag per item (the policy label of a bucket key): at most
 * `k` counters; an unseen item takes over the smallest, inheriting its count as `error`.
 * Any item with more than `1/k` of the total is guaranteed to be listed. Memory O(k);
 * a record is a map lookup plus, on a miss with a full table, an O(k) scan.
 */
export class TopK<T> {
  readonly #k: number;
  readonly #counts = new Map<string, { tag: T; count: number; error: number }>();

  constructor(k: number) {
    if (!Number.isSafeInteger(k) || k < 1) {
      throw new RangeError(`TopK: k must be a positive integer, got ${String(k)}`);
    }
    this.#k = k;
  }

  /** Adds `weight` (default 1) to `item`. */
  add(item: string, tag: T, weight = 1): void {
    const hit = this.#counts.get(item);
    if (hit !== undefined) {
      hit.count += weight;
      return;
    }
    if (this.#counts.size < this.#k) {
      this.#counts.set(item, { tag, count: weight, error: 0 });
      return;
    }
    let minItem = '';
    let min = Infinity;
    for (const [key, c] of this.#counts) {
      if (c.count < min) {
        min = c.count;
        minItem = key;
      }
    }
    this.#counts.delete(minItem);
    this.#counts.set(item, { tag, count: min + weight, error: min });
  }

  /** The tracked items, largest count first (at most k). */
  top(): TopEntry<T>[] {
    return [...this.#counts]
      .map(([item, c]) => ({ item, tag: c.tag, count: c.count, error: c.error }))
      .sort((a, b) => b.count - a.count || (a.item < b.item ? -1 : 1));
  }
}
