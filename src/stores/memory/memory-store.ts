import { StoreError } from '../../core/errors.js';
import { decideBatch } from '../batch.js';
import { dedupKey } from '../key.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../store.js';

export interface MemoryStoreOptions {
  /**
   * Most buckets held at once. Past it, the least recently used bucket is dropped.
   * Dropping an idle (expired) bucket is exact: it recreates as full, which is what it
   * would be. Dropping a live one gives it back full capacity early, so size this above
   * the number of keys active within one TTL; `stats().evictedLive` counts those.
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

interface Entry {
  state: unknown;
  expiresAtMs: number;
}

/** Expired entries checked (from the least recently used end) per apply, to reclaim idle keys. */
const SWEEP_PER_APPLY = 2;

/**
 * The embedded store: an in-process map with TTL expiry and a bound on keys, running the
 * algorithms' own transitions (never a re-implementation). Batches are atomic because
 * they run synchronously. Time comes from the caller (`nowMs`), so a manual clock drives
 * expiry in tests. It limits one process only: for a fleet, use `RedisStore`.
 */
export class MemoryStore implements Store {
  readonly #maxKeys: number;
  // Map iteration order is insertion order; re-inserting on access keeps it LRU-first.
  readonly #entries = new Map<string, Entry>();
  #closed = false;
  #evictions = 0;
  #evictedLive = 0;
  #expired = 0;
  #lastNowMs = -Infinity;
  readonly #dedupTtlMs: number;
  readonly #maxRequestIds: number;
  readonly #requests = new Map<string, { results: readonly StoreResult[]; expiresAtMs: number }>();

  constructor(options: MemoryStoreOptions = {}) {
    const maxKeys = options.maxKeys ?? 1_000_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new RangeError(
        `MemoryStore: maxKeys must be a positive integer, got ${String(maxKeys)}`,
      );
    }
    this.#maxKeys = maxKeys;
    this.#dedupTtlMs = options.dedupTtlMs ?? 60_000;
    this.#maxRequestIds = options.maxRequestIds ?? 100_000;
  }

  apply(
    batch: readonly StoreRequest[],
    options: StoreApplyOptions,
  ): Promise<readonly StoreResult[]> {
    if (this.#closed) {
      const error = new StoreError('SLUICE_ERR_STORE_CLOSED', 'MemoryStore is closed');
      return Promise.resolve(batch.map(() => ({ ok: false as const, error })));
    }
    const { nowMs } = options;
    const rid =
      options.requestId === undefined || batch.length === 0
        ? undefined
        : dedupKey(batch[0]!.key, options.requestId);
    if (rid !== undefined) {
      const seen = this.#requests.get(rid);
      if (seen !== undefined && nowMs < seen.expiresAtMs) return Promise.resolve(seen.results);
      this.#requests.delete(rid);
    }
    this.#lastNowMs = Math.max(this.#lastNowMs, nowMs);
    this.#sweep(nowMs);
    const states = batch.map((r) => this.#read(r.key, nowMs));
    const outcome = decideBatch(batch, states, nowMs);
    outcome.writes.forEach((state, i) => {
      if (state === undefined) return;
      const r = batch[i]!;
      this.#write(r.key, state, nowMs + r.algorithm.ttlMs(r.params));
    });
    const results = outcome.decisions.map((decision) => ({ ok: true as const, decision }));
    if (rid !== undefined) {
      if (this.#requests.size >= this.#maxRequestIds) {
        this.#requests.delete(this.#requests.keys().next().value as string);
      }
      this.#requests.set(rid, { results, expiresAtMs: nowMs + this.#dedupTtlMs });
    }
    return Promise.resolve(results);
  }

  stats(): MemoryStoreStats {
    return {
      keys: this.#entries.size,
      evictions: this.#evictions,
      evictedLive: this.#evictedLive,
      expired: this.#expired,
    };
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#entries.clear();
    this.#requests.clear();
    return Promise.resolve();
  }

  #read(key: string, nowMs: number): unknown {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    this.#entries.delete(key);
    if (nowMs >= e.expiresAtMs) {
      this.#expired += 1;
      return undefined;
    }
    this.#entries.set(key, e); // most recently used, even when the request is denied
    return e.state;
  }

  #write(key: string, state: unknown, expiresAtMs: number): void {
    const e = this.#entries.get(key);
    if (e !== undefined) {
      e.state = state;
      // A write from a clock that went backwards must not shorten the life of a state
      // that already reflects a later instant: expiring early would refill it for free.
      e.expiresAtMs = Math.max(e.expiresAtMs, expiresAtMs);
      return;
    }
    if (this.#entries.size >= this.#maxKeys) {
      const [oldKey, old] = this.#entries.entries().next().value as [string, Entry];
      this.#entries.delete(oldKey);
      this.#evictions += 1;
      if (old.expiresAtMs > this.#lastNowMs) this.#evictedLive += 1;
    }
    this.#entries.set(key, { state, expiresAtMs });
  }

  #sweep(nowMs: number): void {
    let n = 0;
    for (const [key, e] of this.#entries) {
      if (n++ >= SWEEP_PER_APPLY || nowMs < e.expiresAtMs) break;
      this.#entries.delete(key);
      this.#expired += 1;
    }
  }
}
