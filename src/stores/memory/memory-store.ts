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

/** A bucket, linked into the recency list (least recently used first). */
interface Entry {
  readonly key: string;
  state: unknown;
  expiresAtMs: number;
  prev: Entry | undefined;
  next: Entry | undefined;
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
  readonly #entries = new Map<string, Entry>();
  // Recency as an intrusive doubly linked list, so a touch is a few pointer moves. (Deleting
  // and re-inserting Map entries instead leaves holes at the front of the Map's table that
  // every sweep and eviction then has to step over.)
  #lru: Entry | undefined;
  #mru: Entry | undefined;
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
    return Promise.resolve(this.applySync(batch, options));
  }

  /** {@link MemoryStore.apply}, synchronously (the limiter's path: no promise per check). */
  applySync(batch: readonly StoreRequest[], options: StoreApplyOptions): readonly StoreResult[] {
    if (this.#closed) {
      const error = new StoreError('SLUICE_ERR_STORE_CLOSED', 'MemoryStore is closed');
      return batch.map(() => ({ ok: false as const, error }));
    }
    const nowMs = options.nowMs;
    const rid =
      options.requestId === undefined || batch.length === 0
        ? undefined
        : dedupKey(batch[0]!.key, options.requestId);
    if (rid !== undefined) {
      const seen = this.#requests.get(rid);
      if (seen !== undefined && nowMs < seen.expiresAtMs) return seen.results;
      this.#requests.delete(rid);
    }
    if (nowMs > this.#lastNowMs) this.#lastNowMs = nowMs;
    this.#sweep(nowMs);
    let results: StoreResult[];
    if (batch.length === 1) {
      // One request: decideBatch's all-or-nothing reduces to "write it when admitted".
      const r = batch[0]!;
      const e = this.#live(r.key, nowMs);
      const t = r.algorithm.transition(e?.state, nowMs, r.cost, r.params);
      if (t.decision.allowed && r.cost > 0) {
        const expiresAtMs = nowMs + r.algorithm.ttlMs(r.params);
        if (e === undefined) this.#insert(r.key, t.state, expiresAtMs);
        else this.#update(e, t.state, expiresAtMs);
      }
      results = [{ ok: true, decision: t.decision }];
    } else {
      const states = batch.map((r) => this.#live(r.key, nowMs)?.state);
      const outcome = decideBatch(batch, states, nowMs);
      for (let i = 0; i < batch.length; i++) {
        const state = outcome.writes[i];
        if (state === undefined) continue;
        const r = batch[i]!;
        this.#write(r.key, state, nowMs + r.algorithm.ttlMs(r.params));
      }
      results = outcome.decisions.map((decision) => ({ ok: true as const, decision }));
    }
    if (rid !== undefined) {
      if (this.#requests.size >= this.#maxRequestIds) {
        this.#requests.delete(this.#requests.keys().next().value as string);
      }
      this.#requests.set(rid, { results, expiresAtMs: nowMs + this.#dedupTtlMs });
    }
    return results;
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
    this.#lru = this.#mru = undefined;
    this.#requests.clear();
    return Promise.resolve();
  }

  /**
   * The live entry of `key`, made the most recently used (even when the request is then
   * denied); an expired one is removed and counted, and reads as absent.
   */
  #live(key: string, nowMs: number): Entry | undefined {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    if (nowMs >= e.expiresAtMs) {
      this.#remove(e);
      this.#expired += 1;
      return undefined;
    }
    if (e !== this.#mru) {
      this.#unlink(e);
      this.#append(e);
    }
    return e;
  }

  #write(key: string, state: unknown, expiresAtMs: number): void {
    const e = this.#entries.get(key);
    if (e !== undefined) this.#update(e, state, expiresAtMs);
    else this.#insert(key, state, expiresAtMs);
  }

  #update(e: Entry, state: unknown, expiresAtMs: number): void {
    e.state = state;
    // A write from a clock that went backwards must not shorten the life of a state
    // that already reflects a later instant: expiring early would refill it for free.
    if (expiresAtMs > e.expiresAtMs) e.expiresAtMs = expiresAtMs;
  }

  #insert(key: string, state: unknown, expiresAtMs: number): void {
    if (this.#entries.size >= this.#maxKeys) {
      const old = this.#lru!;
      this.#remove(old);
      this.#evictions += 1;
      if (old.expiresAtMs > this.#lastNowMs) this.#evictedLive += 1;
    }
    const e: Entry = { key, state, expiresAtMs, prev: undefined, next: undefined };
    this.#entries.set(key, e);
    this.#append(e);
  }

  #sweep(nowMs: number): void {
    for (let n = 0; n < SWEEP_PER_APPLY; n++) {
      const e = this.#lru;
      if (e === undefined || nowMs < e.expiresAtMs) break;
      this.#remove(e);
      this.#expired += 1;
    }
  }

  #remove(e: Entry): void {
    this.#entries.delete(e.key);
    this.#unlink(e);
  }

  #unlink(e: Entry): void {
    if (e.prev === undefined) this.#lru = e.next;
    else e.prev.next = e.next;
    if (e.next === undefined) this.#mru = e.prev;
    else e.next.prev = e.prev;
    e.prev = e.next = undefined;
  }

  #append(e: Entry): void {
    e.prev = this.#mru;
    if (this.#mru === undefined) this.#lru = e;
    else this.#mru.next = e;
    this.#mru = e;
  }
}
