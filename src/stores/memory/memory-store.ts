import { decisionCell, type Algorithm, type DecisionCell } from '../../algorithms/algorithm.js';
import type { AlgorithmDecision } from '../../core/decision.js';
import { StoreError } from '../../core/errors.js';
import { decideBatch } from '../batch.js';
import { dedupKey } from '../key.js';
import { refundHeld, settleHeld, type HeldBuckets } from './give-back.js';
import type { MemoryStoreOptions, MemoryStoreStats } from './memory-store-options.js';
import { RequestRecords } from './request-records.js';
import { newBucket, newTable, type Bucket, type Table } from './bucket.js';
import { indexable, placeOf, valueIndexId } from './bucket-place.js';
import type {
  KeySpace,
  Store,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
  StoreSettleOptions,
  StoreSettleRequest,
  StoreSettleResult,
} from '../store.js';

export type { MemoryStoreOptions, MemoryStoreStats } from './memory-store-options.js';

/** Slots the per-slot arrays start with (they double as the ring grows). */
const INITIAL_SLOTS = 1024;

/** Ring slots checked for expired buckets per apply, to reclaim idle keys. */
const SWEEP_PER_APPLY = 2;

/** Every request of `batch` failed: the store is closed. */
function closedResults(batch: readonly unknown[]): { ok: false; error: StoreError }[] {
  const error = new StoreError('SLUICE_ERR_STORE_CLOSED', 'MemoryStore is closed');
  return batch.map(() => ({ ok: false as const, error }));
}

/** The results of an empty batch. */
const NO_RESULTS: readonly StoreResult[] = Object.freeze([]);

/**
 * The embedded store: an in-process map with TTL expiry and a bound on keys, running the
 * algorithms' own transitions (never a re-implementation). Batches are atomic because
 * they run synchronously. Time comes from the caller (`nowMs`), so a manual clock drives
 * expiry in tests. It limits one process only: for a fleet, use `RedisStore`.
 *
 * Buckets are keyed by text (`StoreRequest.key`); a key of the one-identity layout is held
 * in a value index under its raw value (bucket-place.ts). The index is the store's
 * {@link MemoryStore.keySpace}, so a request carrying it is found by the descriptor's
 * value alone. Every bucket also has a slot in one ring, for the bound and the
 * expiry sweep:
 * - Eviction is CLOCK (second chance): a use sets the slot's mark (one byte, where a
 *   recency list rewrote links in three scattered objects). When full, a hand walks the
 *   ring from where it last stopped, clearing marks, and drops the first unmarked bucket;
 *   the new bucket takes its slot unmarked. A bucket used since the hand last passed
 *   survives; one not used for a whole turn of the hand is dropped first.
 * - Each apply checks the next {@link SWEEP_PER_APPLY} slots (a second hand) and removes
 *   the expired buckets there; a bucket found expired when used reads as absent either way.
 */
export class MemoryStore implements Store {
  readonly #maxKeys: number;
  /** The text keys' buckets. */
  readonly #text: Table = newTable(undefined, this, true);
  /** Value indexes by id. */
  readonly #tables = new Map<string, Table>();
  /** Every held bucket at its slot; `undefined` at free slots (listed in `#free`). */
  #ring: (Bucket | undefined)[] = [];
  #free: number[] = [];
  /**
   * Per slot, its bucket's expiry (`Infinity` when free) and whether it was used since the
   * clock hand last passed. Arrays rather than bucket fields: the sweep and the hand read
   * them in order without visiting scattered buckets, a number here is not a separate
   * heap object, and the slots of the keys used most (added first) share cache lines.
   */
  #expiry = new Float64Array(INITIAL_SLOTS).fill(Infinity);
  #used = new Uint8Array(INITIAL_SLOTS);
  #size = 0;
  #hand = 0;
  #sweepAt = 0;
  #closed = false;
  #evictions = 0;
  #evictedLive = 0;
  #expired = 0;
  #lastNowMs = -Infinity;
  readonly #requests: RequestRecords;
  constructor(options: MemoryStoreOptions = {}) {
    const maxKeys = options.maxKeys ?? 1_000_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new RangeError(
        `MemoryStore: maxKeys must be a positive integer, got ${String(maxKeys)}`,
      );
    }
    this.#maxKeys = maxKeys;
    this.#requests = new RequestRecords(
      options.dedupTtlMs ?? 60_000,
      options.maxRequestIds ?? 100_000,
    );
  }

  /** Decides `batch` in process: the results themselves, never a promise. */
  apply(batch: readonly StoreRequest[], options: StoreApplyOptions): readonly StoreResult[] {
    if (batch.length === 1 && options.requestId === undefined && !this.#closed) {
      // The limiter's usual call, kept short (see #apply for the general case).
      const nowMs = options.nowMs;
      if (nowMs > this.#lastNowMs) this.#lastNowMs = nowMs;
      this.#sweep(nowMs);
      return [{ ok: true, decision: this.#decideOne(batch[0]!, nowMs, decisionCell()) }];
    }
    if (batch.length === 0) return NO_RESULTS;
    return this.#apply(batch, options);
  }

  /** Any batch, with fresh results (only apply's one-request path reuses them). */
  #apply(batch: readonly StoreRequest[], options: StoreApplyOptions): readonly StoreResult[] {
    if (this.#closed) return closedResults(batch);
    const nowMs = options.nowMs;
    const rid =
      options.requestId === undefined || batch.length === 0
        ? undefined
        : dedupKey(batch[0]!.key, options.requestId);
    if (rid !== undefined) {
      const seen = this.#requests.seen(rid, nowMs);
      if (seen !== undefined) return seen;
    }
    if (nowMs > this.#lastNowMs) this.#lastNowMs = nowMs;
    this.#sweep(nowMs);
    let results: StoreResult[];
    if (batch.length === 1 || options.independent === true) {
      // Batches of one: decideBatch's all-or-nothing reduces to "write it when admitted".
      results = [];
      for (let i = 0; i < batch.length; i++) {
        const decision = this.#decideOne(batch[i]!, nowMs, decisionCell());
        results.push({ ok: true, decision });
      }
    } else {
      const places = batch.map((r) => this.#placeOf(r));
      const states = places.map(([table, key], i) => this.#live(table, key, batch[i]!, nowMs));
      const outcome = decideBatch(batch, states, nowMs);
      for (let i = 0; i < batch.length; i++) {
        const state = outcome.writes[i];
        if (state === undefined) continue;
        const [table, key] = places[i]!;
        this.#write(table, key, batch[i]!, state, nowMs);
      }
      for (const [table] of places) this.#release(table);
      results = outcome.decisions.map((decision) => ({ ok: true as const, decision }));
    }
    if (rid !== undefined) this.#requests.remember(rid, results, nowMs);
    return results;
  }

  /** Decides one request as a batch of its own (see `#one`), its decision written to `out`. */
  #decideOne(r: StoreRequest, nowMs: number, out: DecisionCell): AlgorithmDecision {
    const space = r.space;
    if (space !== undefined && (space as unknown as Table).owner === this) {
      const table = space as unknown as Table;
      const value = r.value!;
      return this.#one(
        table,
        value,
        table.map.get(value),
        r.algorithm,
        r.params,
        r.cost,
        nowMs,
        out,
      );
    }
    const [table, key] = this.#place(r.key);
    const d = this.#one(table, key, table.map.get(key), r.algorithm, r.params, r.cost, nowMs, out);
    this.#release(table);
    return d;
  }

  refund(
    batch: readonly StoreRequest[],
    options: StoreRefundOptions,
  ): Promise<readonly StoreResult[]> {
    return Promise.resolve(this.refundSync(batch, options));
  }

  /**
   * {@link MemoryStore.refund}, synchronously. With a request id, a repeat within the
   * dedup TTL returns the first results and gives back nothing more.
   */
  refundSync(batch: readonly StoreRequest[], options: StoreRefundOptions): readonly StoreResult[] {
    if (this.#closed) return closedResults(batch);
    if (options.nowMs > this.#lastNowMs) this.#lastNowMs = options.nowMs;
    return refundHeld(this.#held, this.#requests, batch, options);
  }

  /**
   * Settles a reservation's buckets (see `Store.settle`), in process: once per
   * reservation id while its record is kept (at most `maxRequestIds` ids are).
   */
  settle(
    batch: readonly StoreSettleRequest[],
    options: StoreSettleOptions,
  ): Promise<readonly StoreSettleResult[]> {
    if (this.#closed) return Promise.resolve(closedResults(batch));
    if (options.nowMs > this.#lastNowMs) this.#lastNowMs = options.nowMs;
    return Promise.resolve(settleHeld(this.#held, this.#requests, batch, options));
  }

  /** The buckets as refunds and settles reach them (give-back.ts). */
  readonly #held: HeldBuckets = {
    read: (r, nowMs) => {
      const [table, key] = this.#placeOf(r);
      const state = this.#live(table, key, r, nowMs);
      this.#release(table);
      return state;
    },
    write: (r, state, nowMs, lifeMs) => {
      const [table, key] = this.#placeOf(r);
      const expiresAtMs = nowMs + Math.max(r.algorithm.ttlMs(r.params), lifeMs);
      this.#commit(table, key, table.map.get(key), r.algorithm, state, expiresAtMs, false);
      this.#release(table);
    },
  };

  /** Where request `r`'s bucket is held: its key space's value, else by its key text. */
  #placeOf(r: StoreRequest): [Table, string] {
    const space = r.space;
    if (space !== undefined && (space as unknown as Table).owner === this) {
      return [space as unknown as Table, r.value!];
    }
    return this.#place(r.key);
  }

  /**
   * The value index of buckets keyed `{<value>}:<name>` (the layout of a policy with one
   * identity key and no scope) as a key space (see `Store.keySpace`); the same index for
   * the same name, for the store's life. `undefined` for a name that layout cannot hold
   * (with `:`).
   */
  keySpace(name: string): KeySpace | undefined {
    if (!indexable(name)) return undefined;
    const table = this.#table(valueIndexId(name));
    table.pinned = true;
    return table as unknown as KeySpace;
  }

  /**
   * Decides one request on the bucket `e` (`undefined` when absent) held under `key` in
   * `table`, and writes its state when admitted with a cost (or denied, under params that
   * charge denials). For an algorithm with an
   * in-place step, nothing is allocated: the step writes the next state into the table's
   * spare object, which a commit copies into the bucket (a denial leaves it as it was),
   * and the decision into `out`.
   *
   * An expired bucket reads as absent and is counted as expired, as in `#live`; it is then
   * removed, unless this request writes: then it is reused for the new bucket, which
   * saves a map delete and insert (its slot, the count of keys and the evictions come out
   * as with remove-then-insert; it stays unmarked, as a new bucket is). A bucket of
   * another algorithm (the policy's algorithm was changed) reads as a fresh bucket too,
   * and a write replaces it.
   */
  #one(
    table: Table,
    key: string,
    e: Bucket | undefined,
    algorithm: Algorithm<unknown, unknown>,
    params: unknown,
    cost: number,
    nowMs: number,
    out: DecisionCell,
  ): AlgorithmDecision {
    let state: unknown = undefined;
    let expired = false;
    if (e !== undefined) {
      if (nowMs >= this.#expiry[e.slot]!) {
        expired = true;
        this.#expired += 1;
      } else {
        this.#used[e.slot] = 1;
        if (e.algorithm === algorithm) state = e.state;
      }
    }
    const inPlace = algorithm.inPlace;
    let decision: AlgorithmDecision;
    let write: unknown = undefined;
    if (inPlace === undefined) {
      const t = algorithm.transition(state, nowMs, cost, params);
      decision = t.decision;
      if (cost > 0 && (decision.allowed || algorithm.chargesDenied?.(params) === true)) {
        write = t.state;
      }
    } else {
      // Only a reused cell can hold one; a new cell stays without the property.
      if (out.delayMs !== undefined) out.delayMs = undefined;
      let next = table.spare;
      if (table.spareOf !== inPlace) {
        next = table.spare = inPlace.blank();
        table.spareOf = inPlace;
      }
      inPlace.step(state, nowMs, cost, params, next as never, out);
      decision = out as AlgorithmDecision;
      // A denial is written only under params that charge denials (envoy counting).
      if (cost > 0 && (out.allowed || algorithm.chargesDenied?.(params) === true)) write = next;
    }
    if (write !== undefined) {
      this.#commit(table, key, e, algorithm, write, nowMs + algorithm.ttlMs(params), expired);
    } else if (expired) this.#remove(e!);
    return decision;
  }

  stats(): MemoryStoreStats {
    return {
      keys: this.#size,
      evictions: this.#evictions,
      evictedLive: this.#evictedLive,
      expired: this.#expired,
    };
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#text.map.clear();
    for (const table of this.#tables.values()) table.map.clear();
    this.#ring = [];
    this.#free = [];
    this.#expiry = new Float64Array(INITIAL_SLOTS).fill(Infinity);
    this.#used = new Uint8Array(INITIAL_SLOTS);
    this.#size = 0;
    this.#requests.clear();
    return Promise.resolve();
  }

  /** The table and key a text key's bucket is held under (see bucket-place.ts). */
  #place(key: string): [Table, string] {
    const place = placeOf(key);
    return place === undefined ? [this.#text, key] : [this.#table(place.id), place.value];
  }

  /** The value index `id`, made if missing. */
  #table(id: string): Table {
    let table = this.#tables.get(id);
    if (table === undefined) {
      table = newTable(id, this, false);
      this.#tables.set(id, table);
    }
    return table;
  }

  /** Forgets an empty value index no caller holds (keys of many layouts leave none behind). */
  #release(table: Table): void {
    if (!table.pinned && table.map.size === 0) this.#tables.delete(table.id!);
  }

  /**
   * The state of `key` in `table` for request `r`, its bucket marked used (even when the
   * request is then denied); an expired bucket is removed and counted, and reads as
   * absent, as does another algorithm's.
   */
  #live(table: Table, key: string, r: StoreRequest, nowMs: number): unknown {
    const e = table.map.get(key);
    if (e === undefined) return undefined;
    if (nowMs >= this.#expiry[e.slot]!) {
      this.#remove(e);
      this.#expired += 1;
      return undefined;
    }
    this.#used[e.slot] = 1;
    return e.algorithm === r.algorithm ? e.state : undefined;
  }

  /** Writes the state a batch decided for request `r` (see `#commit`). */
  #write(table: Table, key: string, r: StoreRequest, state: unknown, nowMs: number): void {
    const algorithm = r.algorithm;
    const expiresAtMs = nowMs + algorithm.ttlMs(r.params);
    this.#commit(table, key, table.map.get(key), algorithm, state, expiresAtMs, false);
  }

  /**
   * Writes `state` of `algorithm` as the bucket of `key` in `table`, whose bucket now is
   * `e` (`undefined` when absent), to live until `expiresAtMs`. A bucket of another
   * algorithm is replaced; `expired` says `e` had expired and is reused as a new bucket
   * (unmarked, with the new expiry).
   */
  #commit(
    table: Table,
    key: string,
    e: Bucket | undefined,
    algorithm: Algorithm<unknown, unknown>,
    state: unknown,
    expiresAtMs: number,
    expired: boolean,
  ): void {
    if (e === undefined) return this.#insert(table, key, algorithm, state, expiresAtMs);
    if (e.algorithm !== algorithm) {
      this.#remove(e);
      return this.#insert(table, key, algorithm, state, expiresAtMs);
    }
    const inPlace = algorithm.inPlace;
    if (inPlace === undefined) e.state = state;
    else inPlace.copy(state, e as never);
    if (expired) {
      this.#expiry[e.slot] = expiresAtMs;
      this.#used[e.slot] = 0;
    } else if (expiresAtMs > this.#expiry[e.slot]!) {
      // A write from a clock that went backwards must not shorten the life of a state
      // that already reflects a later instant: expiring early would refill it for free.
      this.#expiry[e.slot] = expiresAtMs;
    }
  }

  #insert(
    table: Table,
    key: string,
    algorithm: Algorithm<unknown, unknown>,
    state: unknown,
    expiresAtMs: number,
  ): void {
    if (this.#size >= this.#maxKeys) this.#evict(table);
    const ring = this.#ring;
    const slot = this.#free.pop() ?? ring.length;
    ring[slot] = newBucket(table, key, slot, algorithm, state);
    if (slot >= this.#expiry.length) {
      const expiry = new Float64Array(2 * this.#expiry.length).fill(Infinity);
      expiry.set(this.#expiry);
      this.#expiry = expiry;
      const used = new Uint8Array(expiry.length);
      used.set(this.#used);
      this.#used = used;
    }
    this.#expiry[slot] = expiresAtMs;
    this.#used[slot] = 0;
    table.map.set(key, ring[slot]);
    this.#size += 1;
  }

  /**
   * Drops one bucket for room: the first unmarked one from the hand on, clearing the marks
   * it passes. With `#size` at the bound every slot is held (slots are only added while
   * below it), and a turn clears every mark, so this ends within one turn and a slot.
   * `into` is the table about to take the new bucket: it is not forgotten even if this
   * empties it.
   */
  #evict(into: Table): void {
    const slots = this.#ring.length;
    const used = this.#used;
    let at = this.#hand;
    for (;;) {
      if (at >= slots) at = 0;
      if (used[at] === 0) break;
      used[at] = 0;
      at += 1;
    }
    const old = this.#ring[at]!;
    this.#hand = at + 1;
    if (this.#expiry[at]! > this.#lastNowMs) this.#evictedLive += 1;
    this.#evictions += 1;
    this.#remove(old);
    if (old.table !== into) this.#release(old.table);
  }

  #sweep(nowMs: number): void {
    const expiry = this.#expiry;
    const slots = this.#ring.length;
    let at = this.#sweepAt;
    for (let n = 0; n < SWEEP_PER_APPLY; n++) {
      if (at >= slots) {
        if (slots === 0) return;
        at = 0;
      }
      if (nowMs >= expiry[at]!) {
        const e = this.#ring[at]!;
        this.#remove(e);
        this.#release(e.table);
        this.#expired += 1;
      }
      at += 1;
    }
    this.#sweepAt = at;
  }

  #remove(e: Bucket): void {
    e.held = false;
    e.table.map.delete(e.key);
    this.#ring[e.slot] = undefined;
    this.#expiry[e.slot] = Infinity;
    this.#used[e.slot] = 0;
    this.#free.push(e.slot);
    this.#size -= 1;
  }
}
