import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StageVerdict,
} from '../limiter/stage.js';

/** Options of {@link OverLimitCache}. */
export interface OverLimitCacheOptions {
  /**
   * Most bytes the cache's entries take, by the estimate {@link entryBytes}; past it the
   * oldest entries go first. envoyproxy/ratelimit's `LOCAL_CACHE_SIZE_IN_BYTES`.
   */
  readonly maxBytes: number;
}

/**
 * Estimated bytes of one entry: the key's UTF-16 text plus the map entry and the record
 * (V8 on 64-bit: about 100 bytes for a small object, a hash-table slot and a string
 * header). An estimate, the same on every run, so the bound is predictable.
 */
export function entryBytes(key: string): number {
  return ENTRY_OVERHEAD_BYTES + 2 * key.length;
}
const ENTRY_OVERHEAD_BYTES = 112;

/** What the store said when it denied a bucket. */
interface Denial {
  /** The smallest cost known not to fit until `untilMs`. */
  readonly cost: number;
  /** When that cost may fit again (the store's retry time). */
  readonly untilMs: number;
  readonly limit: number;
  readonly remaining: number;
  /** When the bucket is full again if left idle. */
  readonly resetAtMs: number;
  readonly bytes: number;
}

/**
 * The over-limit cache (docs/design.md, "Stages"): a bucket the store has just denied is
 * denied in process until the store's retry time, with path `cache`, without a store call.
 *
 * It never denies a request the store would admit. A denial of cost `c` at `t` with retry
 * `r` says the bucket holds less than `c` until `t + r` even if nothing else takes from
 * it; other instances only take more. Every algorithm's retry time grows with the cost,
 * so any cost `≥ c` is denied until then too; a smaller cost may fit earlier and goes to
 * the store. (A refund, such as a batch given back on shutdown, can make room early: then
 * the cache may deny what the store would now admit, until the retry time. A settle that
 * gives back is told to it, and the bucket's entry goes.) Shadow
 * policies are not cached: their denials block nothing.
 *
 * Memory is bounded by bytes ({@link entryBytes} per entry); the oldest entries go first,
 * and an entry past its retry time is dropped when met.
 */
export class OverLimitCache implements Stage {
  readonly name = 'over-limit-cache';
  readonly #maxBytes: number;
  readonly #entries = new Map<string, Denial>();
  #bytes = 0;

  constructor(options: OverLimitCacheOptions) {
    const { maxBytes } = options;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw new PolicyError(
        'SLUICE_ERR_LOCAL_INVALID',
        `over-limit cache: maxBytes must be a positive whole number; got ${String(maxBytes)}`,
      );
    }
    this.#maxBytes = maxBytes;
  }

  appliesTo(policy: Policy): boolean {
    return !policy.shadow;
  }

  enter(item: StageItem, ctx: StageContext): StageVerdict {
    const d = this.#entries.get(item.key);
    if (d === undefined) return undefined;
    if (ctx.nowMs >= d.untilMs) {
      this.#drop(item.key, d);
      return undefined;
    }
    if (item.cost < d.cost) return undefined;
    return {
      kind: 'answer',
      decision: {
        status: 'OVER_LIMIT',
        allowed: false,
        limit: d.limit,
        remaining: d.remaining,
        retryAfterMs: d.untilMs - ctx.nowMs,
        resetAfterMs: Math.max(0, d.resetAtMs - ctx.nowMs),
      },
      path: 'cache',
    };
  }

  settle(item: StageItem, verdict: StageVerdict, outcome: StageOutcome, ctx: StageContext): void {
    if (verdict !== undefined) return;
    const { decision } = outcome;
    // Only the store's own denial of this cost says when it may fit (a batch stage's
    // denial may wait for a whole reservation, longer than this cost needs).
    if (decision.path !== 'store') return;
    if (decision.allowed || decision.status !== 'OVER_LIMIT') return;
    if (!Number.isFinite(decision.retryAfterMs) || decision.retryAfterMs <= 0) return;
    this.remember(item.key, item.cost, ctx.nowMs, decision);
  }

  /**
   * A settle gave units back to `key`'s bucket: the denial remembered for it may no longer
   * hold, so it is forgotten (the next check asks the store). A charge keeps it: the
   * bucket only holds less.
   */
  reservationSettled(_policy: Policy, key: string, units: number): void {
    const d = this.#entries.get(key);
    if (d !== undefined && units > 0) this.#drop(key, d);
  }

  /**
   * Records that the store denied `cost` on `key` at `nowMs` with `decision`. A cost
   * smaller than an entry's replaces it (it is known not to fit either).
   */
  remember(
    key: string,
    cost: number,
    nowMs: number,
    decision: { limit: number; remaining: number; retryAfterMs: number; resetAfterMs: number },
  ): void {
    const old = this.#entries.get(key);
    if (old !== undefined) this.#drop(key, old);
    const bytes = entryBytes(key);
    if (bytes > this.#maxBytes) return;
    while (this.#bytes + bytes > this.#maxBytes) {
      const [oldestKey, oldest] = this.#entries.entries().next().value as [string, Denial];
      this.#drop(oldestKey, oldest);
    }
    this.#entries.set(key, {
      cost,
      untilMs: nowMs + decision.retryAfterMs,
      limit: decision.limit,
      remaining: decision.remaining,
      resetAtMs: nowMs + decision.resetAfterMs,
      bytes,
    });
    this.#bytes += bytes;
  }

  /** Bytes held now, by the estimate. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Entries held now. */
  get size(): number {
    return this.#entries.size;
  }

  #drop(key: string, d: Denial): void {
    this.#entries.delete(key);
    this.#bytes -= d.bytes;
  }
}
