import { identityHash } from '../identity-hash.js';

/** One entry of {@link HotKeys.top}. */
export interface HotKey {
  /** First 16 hex digits of SHA-256 of the identity (the key's hash tag); never the identity. */
  readonly identity: string;
  /** Estimated requests for this identity since the store started (an upper bound). */
  readonly count: number;
  /** How much of `count` may belong to identities it displaced: `count - error` is a lower bound. */
  readonly error: number;
}

/**
 * The busiest identities (hash tags, i.e. Redis Cluster slots' units of placement) seen by
 * this process, as a bounded top-k: the space-saving algorithm (Metwally, Agrawal and El
 * Abbadi, 2005) keeps at most `k` counters; an unseen identity takes over the smallest
 * counter, inheriting its count as `error`. Any identity with more than `1/k` of the
 * requests is guaranteed to be listed. Memory is O(k) however many identities pass;
 * a record is a map lookup plus, on a miss with a full table, an O(k) scan.
 *
 * `top()` gives identities only as truncated SHA-256 hashes (computed there, off the
 * decision path), so metrics and logs built from it never carry a tenant or user id. (A low-entropy id space can still be enumerated
 * against the hash; treat the output as pseudonymous, not anonymous.)
 */
export class HotKeys {
  readonly #k: number;
  /**
   * Counter slot by raw identity: it never leaves the process except hashed, through
   * top(). The counters live in flat arrays, so a miss (most records, with many
   * identities) scans numbers and allocates nothing.
   */
  readonly #slots = new Map<string, number>();
  readonly #ids: string[] = [];
  readonly #counts: number[] = [];
  readonly #errors: number[] = [];

  /** @param k - counters kept (and most entries `top()` returns). @default 32 */
  constructor(k = 32) {
    if (!Number.isSafeInteger(k) || k < 1) {
      throw new RangeError(`HotKeys: k must be a positive integer, got ${String(k)}`);
    }
    this.#k = k;
  }

  /** Counts one request for the identity `tag` (a bucket key's hash tag). */
  record(tag: string): void {
    const counts = this.#counts;
    const hit = this.#slots.get(tag);
    if (hit !== undefined) {
      counts[hit]!++;
      return;
    }
    if (counts.length < this.#k) {
      this.#slots.set(tag, counts.length);
      this.#ids.push(tag);
      counts.push(1);
      this.#errors.push(0);
      return;
    }
    let slot = 0;
    for (let i = 1; i < counts.length; i++) if (counts[i]! < counts[slot]!) slot = i;
    const min = counts[slot]!;
    this.#slots.delete(this.#ids[slot]!);
    this.#slots.set(tag, slot);
    this.#ids[slot] = tag;
    counts[slot] = min + 1;
    this.#errors[slot] = min;
  }

  /** The tracked identities, busiest first (at most k). */
  top(): HotKey[] {
    return this.#ids
      .map((tag, i) => ({
        identity: identityHash(tag),
        count: this.#counts[i]!,
        error: this.#errors[i]!,
      }))
      .sort((a, b) => b.count - a.count || (a.identity < b.identity ? -1 : 1));
  }
}
