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
  /** By raw identity: it never leaves the process except hashed, through top(). */
  readonly #counts = new Map<string, { count: number; error: number }>();

  /** @param k - counters kept (and most entries `top()` returns). @default 32 */
  constructor(k = 32) {
    if (!Number.isSafeInteger(k) || k < 1) {
      throw new RangeError(`HotKeys: k must be a positive integer, got ${String(k)}`);
    }
    this.#k = k;
  }

  /** Counts one request for the identity `tag` (a bucket key's hash tag). */
  record(tag: string): void {
    const id = tag;
    const hit = this.#counts.get(id);
    if (hit !== undefined) {
      hit.count++;
      return;
    }
    if (this.#counts.size < this.#k) {
      this.#counts.set(id, { count: 1, error: 0 });
      return;
    }
    let minId = '';
    let min = Infinity;
    for (const [key, c] of this.#counts) {
      if (c.count < min) {
        min = c.count;
        minId = key;
      }
    }
    this.#counts.delete(minId);
    this.#counts.set(id, { count: min + 1, error: min });
  }

  /** The tracked identities, busiest first (at most k). */
  top(): HotKey[] {
    return [...this.#counts]
      .map(([tag, c]) => ({ identity: identityHash(tag), count: c.count, error: c.error }))
      .sort((a, b) => b.count - a.count || (a.identity < b.identity ? -1 : 1));
  }
}
