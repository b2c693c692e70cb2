// The options and statistics of MemoryStore (memory-store.ts).

export interface MemoryStoreOptions {
  /**
   * Most buckets held at once, a hard bound. Past it, a bucket not used lately is dropped
   * (second chance: see the class comment). Dropping an idle (expired) bucket is exact: it
   * recreates as full, which is what it would be. Dropping a live one gives it back full
   * capacity early, so size this above the number of keys active within one TTL;
   * `stats().evictedLive` counts those.
   * @default 1_000_000
   */
  readonly maxKeys?: number;
  /** How long a request id's first results are remembered, in ms. @default 60_000 */
  readonly dedupTtlMs?: number;
  /** Most request ids remembered at once (the oldest recorded is dropped first). @default 100_000 */
  readonly maxRequestIds?: number;
}

export interface MemoryStoreStats {
  /** Buckets held now (expired ones are removed lazily). */
  readonly keys: number;
  /** Buckets dropped for room, in total. */
  readonly evictions: number;
  /** Of those, buckets that had not expired yet: each may have admitted up to a full burst extra. */
  readonly evictedLive: number;
  /** Buckets removed because their TTL passed. */
  readonly expired: number;
}
