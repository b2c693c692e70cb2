import type { StoreResult } from '../store.js';

/**
 * The results of batches applied with a request id, kept for the dedup TTL so that a
 * repeat answers with them instead of applying again (MemoryStore's idempotency). At most
 * `maxIds` are kept; past that the oldest goes first.
 */
export class RequestRecords {
  readonly #ttlMs: number;
  readonly #maxIds: number;
  readonly #records = new Map<string, { results: readonly StoreResult[]; expiresAtMs: number }>();

  constructor(ttlMs: number, maxIds: number) {
    this.#ttlMs = ttlMs;
    this.#maxIds = maxIds;
  }

  /** The results recorded for `id` while they are live at `nowMs`; an expired record goes. */
  seen(id: string, nowMs: number): readonly StoreResult[] | undefined {
    const record = this.#records.get(id);
    if (record === undefined) return undefined;
    if (nowMs < record.expiresAtMs) return record.results;
    this.#records.delete(id);
    return undefined;
  }

  /** Records `results` for `id` from `nowMs` for the TTL, or `keepMs` when that is longer. */
  remember(id: string, results: readonly StoreResult[], nowMs: number, keepMs = 0): void {
    if (this.#records.size >= this.#maxIds) {
      this.#records.delete(this.#records.keys().next().value as string);
    }
    this.#records.set(id, { results, expiresAtMs: nowMs + Math.max(this.#ttlMs, keepMs) });
  }

  clear(): void {
    this.#records.clear();
  }
}
