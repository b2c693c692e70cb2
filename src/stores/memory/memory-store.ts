import {
  decisionCell,
  type Algorithm,
  type InPlaceStep,
  type DecisionCell,
} from '../../algorithms/algorithm.js';
import type { AlgorithmDecision } from '../../core/decision.js';
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

/**
 * A bucket key, with room for the store's handle on its bucket. A caller that decides the
 * same key again and again (the limiter, for a descriptor it remembers) passes the same
 * ref, and the store goes straight to the bucket it found last time, while that bucket is
 * still held, instead of looking the key up.
 * @internal
 */
export interface BucketRef {
  readonly key: string;
  /** Opaque; set by the store. */
  handle: unknown;
}

/** A bucket, linked into the recency list (least recently used first). */
interface Entry {
  readonly key: string;
  readonly owner: MemoryStore;
  /** False once removed (expired, evicted or closed): a stale handle then looks the key up. */
  held: boolean;
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
  /** Per in-place algorithm, the object its next step writes into (see `#one`). */
  readonly #spares = new Map<InPlaceStep<unknown, unknown>, unknown>();
  /** The decision of the last `decideOne`, reused. */
  readonly #out = decisionCell();

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
      const decision = this.#one(
        r.key,
        undefined,
        r.algorithm,
        r.params,
        r.cost,
        nowMs,
        decisionCell(),
      );
      results = [{ ok: true, decision }];
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

  /**
   * The limiter's path for a batch of one request with no request id: the decision
   * `applySync` would return, without the batch and result objects. The decision may be
   * an object the store reuses: read it before the next call. `undefined` when the store
   * is closed (then `applySync` reports the error).
   * @internal
   */
  decideOne(
    ref: BucketRef,
    algorithm: Algorithm<unknown, unknown>,
    params: unknown,
    cost: number,
    nowMs: number,
  ): AlgorithmDecision | undefined {
    if (this.#closed) return undefined;
    if (nowMs > this.#lastNowMs) this.#lastNowMs = nowMs;
    this.#sweep(nowMs);
    return this.#one(ref.key, ref, algorithm, params, cost, nowMs, this.#out);
  }

  /**
   * Decides one request on `key` and writes its state when admitted with a cost; `ref`,
   * when given, holds the handle on the bucket (a request object never does: the store
   * writes nothing into a caller's request). Algorithms with an in-place step update the
   * bucket's state object instead of allocating one: the step writes into a spare object
   * of the algorithm, which becomes the bucket's state on commit while the old state
   * becomes the spare. The decision is then written into `out`.
   *
   * An expired bucket reads as absent and is counted as expired, as in `#live`; it is then
   * removed, unless this request writes: then its entry is reused for the new bucket,
   * which saves a map delete and insert (the key's position, the count of keys and the
   * evictions come out as with remove-then-insert).
   */
  #one(
    key: string,
    ref: BucketRef | undefined,
    algorithm: Algorithm<unknown, unknown>,
    params: unknown,
    cost: number,
    nowMs: number,
    out: DecisionCell,
  ): AlgorithmDecision {
    const held = ref?.handle as Entry | undefined;
    const e =
      held !== undefined && held.held && held.owner === this ? held : this.#entries.get(key);
    let state: unknown = undefined;
    let expired = false;
    if (e !== undefined) {
      this.#use(e);
      if (nowMs >= e.expiresAtMs) {
        expired = true;
        this.#expired += 1;
      } else state = e.state;
    }
    const inPlace = algorithm.inPlace;
    let decision: AlgorithmDecision;
    let write: unknown = undefined;
    if (inPlace === undefined) {
      const t = algorithm.transition(state, nowMs, cost, params);
      decision = t.decision;
      if (decision.allowed && cost > 0) write = t.state;
    } else {
      // Only a reused cell can hold one; a new cell stays without the property.
      if (out.delayMs !== undefined) out.delayMs = undefined;
      const next = this.#spares.get(inPlace) ?? inPlace.blank();
      inPlace.step(state, nowMs, cost, params, next, out);
      decision = out as AlgorithmDecision;
      if (out.allowed && cost > 0) {
        write = next;
        // The state the write replaces is the next spare.
        this.#spares.set(inPlace, e === undefined ? inPlace.blank() : e.state);
      } else this.#spares.set(inPlace, next);
    }
    if (write !== undefined) {
      const expiresAtMs = nowMs + algorithm.ttlMs(params);
      if (e === undefined) {
        const added = this.#insert(key, write, expiresAtMs);
        if (ref !== undefined) ref.handle = added;
      } else if (expired) {
        e.state = write;
        e.expiresAtMs = expiresAtMs;
      } else this.#update(e, write, expiresAtMs);
    } else if (expired) this.#remove(e!);
    return decision;
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
    this.#use(e);
    return e;
  }

  /** Makes `e` the most recently used. */
  #use(e: Entry): void {
    if (e !== this.#mru) {
      this.#unlink(e);
      this.#append(e);
    }
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

  #insert(key: string, state: unknown, expiresAtMs: number): Entry {
    if (this.#entries.size >= this.#maxKeys) {
      const old = this.#lru!;
      this.#remove(old);
      this.#evictions += 1;
      if (old.expiresAtMs > this.#lastNowMs) this.#evictedLive += 1;
    }
    const e: Entry = {
      key,
      owner: this,
      held: true,
      state,
      expiresAtMs,
      prev: undefined,
      next: undefined,
    };
    this.#entries.set(key, e);
    this.#append(e);
    return e;
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
    e.held = false;
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
