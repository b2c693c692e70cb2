import { randomUUID } from 'node:crypto';
import { algorithmOf } from '../algorithms/index.js';
import { systemClock, type Clock } from '../core/clock.js';
import { FIT_EPSILON } from '../algorithms/algorithm.js';
import type { AlgorithmDecision } from '../core/decision.js';
import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type {
  Stage,
  StageContext,
  StageGateway,
  StageItem,
  StageOutcome,
  StageVerdict,
} from '../limiter/stage.js';
import type { StageRecorder } from '../metrics/stage-metrics.js';
import type { StoreResult } from '../stores/store.js';
import { denial, newReserve, putBack, unitsRequest, type Reserve } from './batch-reserve.js';

/** Options of {@link TokenBatchStage}. */
export interface TokenBatchOptions {
  /**
   * Most bucket keys with a reserve at once; past it the oldest reserve is dropped with
   * its unspent units (under-use, counted in `stats().unitsDropped`). @default 10_000
   */
  readonly maxKeys?: number;
  /**
   * After a reservation call fails, how long the key's checks go straight to the store
   * (where the failure mode decides) before another reservation is tried. @default 1_000
   */
  readonly retryAfterFailureMs?: number;
  /** Prefix of this instance's reservation ids; unique per instance. @default a UUID */
  readonly instanceId?: string;
  /** The clock `close` reads (checks bring their own `nowMs`). @default the system clock */
  readonly clock?: Clock;
  /**
   * Told the units reserved (`granted`), spent on admitted checks (`spent`) and given back
   * by `close` (`returned`), as stage `batch` (the service's `ServiceMetrics.stages`).
   * @default none
   */
  readonly metrics?: StageRecorder;
}

/** Counters of a {@link TokenBatchStage} (live object). */
export interface TokenBatchStats {
  /** Store calls made to reserve (retries included): the remote calls batching costs. */
  reservationCalls: number;
  /** Units taken from the global bucket. */
  unitsReserved: number;
  /** Units spent on admitted requests (net of units given back by `settle`). */
  unitsSpent: number;
  /** Units that expired unspent (ttl passed): under-use. */
  unitsExpired: number;
  /** Units dropped with a reserve evicted for room: under-use. */
  unitsDropped: number;
  /** Units given back to the global bucket by `close`. */
  unitsReturned: number;
  /** Items answered from a reserve. */
  answered: number;
}

/**
 * Token batching (docs/design.md, "Stages"), for policies with `batch: { size, ttl }`. An
 * instance reserves up to `size` units from the global bucket in one atomic store call
 * (`Store.apply` with cost n) and admits from them in process, with path `batch`.
 *
 * - Reservation ids: every reservation carries a request id, so the store's dedup makes
 *   a retried call (after a timeout, whose outcome is unknown) take at most once. One
 *   retry is made; if its outcome is unknown too, nothing is added, and nothing is ever
 *   given back for it.
 * - Expiry: units not spent within `ttl` are dropped: bounded under-use, never given back.
 * - Size: slow start per key. A cold key reserves 1 (at least the cost); a reserve spent
 *   before it expired doubles the next, up to `size`; one that expired with units left
 *   makes the next as large as what was spent. So a key reserves about what it uses
 *   within a ttl, and many cold keys hold little.
 * - Held: at most max(size, cost) units per key and instance.
 * - A reservation asks for no more than the store last said it holds; a denied one larger
 *   than needed is asked again smaller (at least the units needed); the store's denial of
 *   the units needed is the item's answer (path `batch`). Over the limit, items needing
 *   as many are then denied here until a whole reservation (the adaptive size) has
 *   refilled (`size` units), not just the units needed: about one call per `size` units
 *   even over the limit; the units wait in the global bucket meanwhile.
 * - A failed reservation call passes the item on to the store (the failure mode decides)
 *   and the key's items keep going there for `retryAfterFailureMs`.
 * - `settle`: units of an admitted item whose check was denied go back to the reserve.
 * - `close`: each unexpired reserve's unspent units (of its last reservation) go back to
 *   the global bucket through `Store.refund`, marked with the reservation's id, so a
 *   repeated close gives back once.
 */
export class TokenBatchStage implements Stage {
  readonly name = 'batch';
  /**
   * The store gateway of the limiter this stage serves, from the first check it entered:
   * reservations and the refunds of `close` go through it, never to the store directly.
   */
  #gateway: StageGateway | undefined;
  readonly #maxKeys: number;
  readonly #retryAfterFailureMs: number;
  readonly #instanceId: string;
  readonly #clock: Clock;
  readonly #metrics: StageRecorder | undefined;
  readonly #reserves = new Map<string, Reserve>();
  /** Reservations in flight (close waits for them). */
  readonly #inflight = new Set<Promise<unknown>>();
  #seq = 0;
  #closing: Promise<void> | undefined;
  readonly stats: TokenBatchStats = {
    reservationCalls: 0,
    unitsReserved: 0,
    unitsSpent: 0,
    unitsExpired: 0,
    unitsDropped: 0,
    unitsReturned: 0,
    answered: 0,
  };

  constructor(options: TokenBatchOptions = {}) {
    const maxKeys = options.maxKeys ?? 10_000;
    const retry = options.retryAfterFailureMs ?? 1_000;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new PolicyError(
        'SLUICE_ERR_BATCH_INVALID',
        `batch stage: maxKeys must be a positive whole number; got ${String(maxKeys)}`,
      );
    }
    if (!Number.isFinite(retry) || retry < 0) {
      throw new PolicyError(
        'SLUICE_ERR_BATCH_INVALID',
        `batch stage: retryAfterFailureMs must be a non-negative number; got ${String(retry)}`,
      );
    }
    this.#maxKeys = maxKeys;
    this.#retryAfterFailureMs = retry;
    this.#instanceId = options.instanceId ?? randomUUID();
    this.#clock = options.clock ?? systemClock;
    this.#metrics = options.metrics;
  }

  appliesTo(policy: Policy): boolean {
    return policy.batch !== undefined && !policy.shadow;
  }

  enter(item: StageItem, ctx: StageContext): StageVerdict | Promise<StageVerdict> {
    const gateway = ctx.gateway;
    if (
      gateway === undefined ||
      item.cost === 0 ||
      item.policy.batch === undefined ||
      this.#closing !== undefined
    ) {
      return undefined;
    }
    this.#gateway ??= gateway;
    const r = this.#reserve(item);
    const answer = this.#take(r, item, ctx.nowMs);
    if (answer !== undefined) return answer;
    if (ctx.nowMs < r.downUntilMs) return undefined;
    const denied = this.#stillDenied(r, item, ctx.nowMs);
    if (denied !== undefined) return denied;
    return this.#refillThenTake(r, item, ctx);
  }

  settle(item: StageItem, verdict: StageVerdict, outcome: StageOutcome, ctx: StageContext): void {
    if (verdict?.kind !== 'answer' || verdict.path !== 'batch' || !verdict.decision.allowed) {
      return;
    }
    if (outcome.admitted) {
      // Counted spent once the check is admitted: units a denied check gives back are not.
      this.#metrics?.spent('batch', item.name ?? item.policy.name, item.cost);
      return;
    }
    const r = this.#reserves.get(item.key);
    if (r === undefined || ctx.nowMs >= r.expiresAtMs) return;
    const cap = Math.max(item.policy.batch?.size ?? 0, item.cost);
    const back = Math.min(item.cost, cap - r.units);
    if (back <= 0) return;
    r.units += back;
    this.stats.unitsSpent -= back;
  }

  /** Gives unspent units back to the global bucket (where the store can); idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#giveBack();
    return this.#closing;
  }

  /** Units held now across keys (unexpired or not yet found expired). */
  get unitsHeld(): number {
    let n = 0;
    for (const r of this.#reserves.values()) n += r.units;
    return n;
  }

  #reserve(item: StageItem): Reserve {
    let r = this.#reserves.get(item.key);
    if (r !== undefined) return r;
    if (this.#reserves.size >= this.#maxKeys) {
      const [oldestKey, oldest] = this.#reserves.entries().next().value as [string, Reserve];
      this.stats.unitsDropped += oldest.units;
      this.#reserves.delete(oldestKey);
    }
    r = newReserve(item.policy, item.key, item.name);
    this.#reserves.set(item.key, r);
    return r;
  }

  /** The answer from the reserve when it holds the cost, unexpired; else undefined. */
  #take(r: Reserve, item: StageItem, nowMs: number): StageVerdict {
    if (nowMs >= r.expiresAtMs || r.units < item.cost) return undefined;
    r.units -= item.cost;
    this.stats.unitsSpent += item.cost;
    this.stats.answered++;
    return {
      kind: 'answer',
      decision: {
        status: 'OK',
        allowed: true,
        limit: r.limit,
        remaining: r.remaining + r.units,
        retryAfterMs: 0,
        resetAfterMs: r.resetAfterMs,
      },
      path: 'batch',
    };
  }

  /** The remembered denial, when it covers this item (see `Reserve.deniedNeed`). */
  #stillDenied(r: Reserve, item: StageItem, nowMs: number): StageVerdict {
    if (nowMs >= r.deniedUntilMs || r.denied === undefined) return undefined;
    const held = nowMs < r.expiresAtMs ? r.units : 0;
    if (item.cost - held < r.deniedNeed) return undefined;
    return {
      kind: 'answer',
      decision: {
        ...r.denied,
        remaining: r.denied.remaining,
        retryAfterMs: r.deniedUntilMs - nowMs,
      },
      path: 'batch',
    };
  }

  async #refillThenTake(r: Reserve, item: StageItem, ctx: StageContext): Promise<StageVerdict> {
    // While a reservation with spare units is in flight, wait for it when its spare
    // units cover the waiters or no more may be reserved beside it (size reached): then
    // a key makes about one call per `size` units. Without spare units in flight (size 1,
    // or a cold key), reserve at once, side by side.
    const size = item.policy.batch!.size;
    while (
      r.inflightExtra > 0 &&
      (r.waiting + item.cost <= r.inflightExtra ||
        Math.min(r.next, size) - item.cost - r.inflightExtra <= 0)
    ) {
      r.waiting += item.cost;
      try {
        await this.#nextCompletion(r);
      } finally {
        r.waiting -= item.cost;
      }
      const answer = this.#take(r, item, ctx.nowMs) ?? this.#stillDenied(r, item, ctx.nowMs);
      if (answer !== undefined) return answer;
      if (ctx.nowMs < r.downUntilMs || this.#closing !== undefined) return undefined;
    }
    const refill = this.#refill(r, item, ctx);
    this.#inflight.add(refill);
    try {
      return await refill;
    } finally {
      this.#inflight.delete(refill);
    }
  }

  /** Resolves when the next reservation of `r` completes. */
  #nextCompletion(r: Reserve): Promise<void> {
    r.wake ??= new Promise<void>((resolve) => {
      r.wakeUp = resolve;
    });
    return r.wake;
  }

  /**
   * Reserves for `item` and answers it, or passes it on when the store failed. The units
   * the reserve holds are set aside for this item first (others cannot spend them
   * meanwhile), so the reservation asks only for the rest, plus spare units for the
   * items to come (up to the adaptive size, less what is held or in flight).
   */
  async #refill(r: Reserve, item: StageItem, ctx: StageContext): Promise<StageVerdict> {
    const batch = item.policy.batch!;
    const nowMs = ctx.nowMs;
    if (nowMs >= r.expiresAtMs) {
      // Expired with units left: spend about what was spent next time.
      if (r.units > 0) {
        this.stats.unitsExpired += r.units;
        r.next = Math.max(1, r.taken - r.units);
      }
      r.units = 0;
    } else if (r.taken > 0) {
      // Spent (all but less than this cost) before it expired: a busier key.
      r.next = Math.min(batch.size, 2 * r.taken);
    }
    const mine = r.units;
    r.units = 0;
    const need = item.cost - mine;
    // Spare units up to the adaptive size, and no more than the store last said it holds
    // (near the limit a large reservation would be denied and cost a second call).
    let extra = Math.max(
      0,
      Math.min(
        Math.min(r.next, batch.size) - item.cost - r.inflightExtra,
        Math.floor(r.remaining + FIT_EPSILON) - need - r.inflightExtra,
      ),
    );
    r.inflightExtra += extra;
    try {
      for (;;) {
        const result = await this.#reserveCall(r, need + extra, ctx);
        if (result === undefined || !result.ok) {
          r.downUntilMs = nowMs + this.#retryAfterFailureMs;
          putBack(r, mine, nowMs);
          return undefined;
        }
        const d = result.decision;
        r.remaining = d.remaining;
        if (d.allowed) {
          this.#hold(r, need + extra, nowMs + batch.ttlMs, d, nowMs);
          r.units += mine;
          return this.#take(r, item, nowMs);
        }
        if (extra > 0) {
          // Ask again for what the store says it holds (at least the units needed, to
          // learn the exact answer for them); always less than before, so this ends.
          const fewer = Math.max(
            0,
            Math.min(extra - 1, Math.floor(d.remaining + FIT_EPSILON) - need),
          );
          r.inflightExtra -= extra - fewer;
          extra = fewer;
          continue;
        }
        putBack(r, mine, nowMs);
        const answer = denial(d, mine);
        if (d.status === 'OVER_LIMIT' && Number.isFinite(d.retryAfterMs) && d.retryAfterMs > 0) {
          // Over the limit, wait until a whole batch (`size`) has refilled rather than until
          // the units needed have: items needing as many are denied here until then, so
          // the key makes about one call per reservation even while over its limit. The
          // units are not lost: they stay in the global bucket for whoever asks next.
          const target = Math.max(need, batch.size);
          const perMs =
            algorithmOf(item.policy.algorithm).sustainedRate(item.policy.params).perSecond / 1_000;
          r.deniedNeed = need;
          r.deniedUntilMs = nowMs + d.retryAfterMs + (target - need) / perMs;
          r.denied = answer;
          // What the bucket should hold then: the next reservation asks for it.
          r.remaining = target;
        }
        return { kind: 'answer', decision: answer, path: 'batch' };
      }
    } finally {
      r.inflightExtra -= extra;
      const wakeUp = r.wakeUp;
      r.wake = undefined;
      r.wakeUp = undefined;
      wakeUp?.();
    }
  }

  #hold(r: Reserve, n: number, expiresAtMs: number, d: AlgorithmDecision, nowMs: number): void {
    r.units += n;
    r.taken = n;
    r.reservedAtMs = nowMs;
    r.expiresAtMs = expiresAtMs;
    r.limit = d.limit;
    r.remaining = d.remaining;
    r.resetAfterMs = d.resetAfterMs;
    this.stats.unitsReserved += n;
    this.#metrics?.granted('batch', r.name, n);
  }

  /**
   * One reservation of `n` units under a fresh id, retried once under the same id when
   * its outcome is unknown (a timeout): the store's dedup makes the two take at most once.
   * `undefined` or a failed result: nothing is known to be reserved.
   */
  async #reserveCall(r: Reserve, n: number, ctx: StageContext): Promise<StoreResult | undefined> {
    const requestId = `sluice-batch:${this.#instanceId}:${(this.#seq++).toString(36)}`;
    r.requestId = requestId;
    const req = unitsRequest(r, n);
    const gateway = ctx.gateway!;
    let result: StoreResult | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      // The retry only within the caller's budget: the check's whole wait is bounded by it.
      if (attempt > 0 && (ctx.signal?.aborted === true || spent(ctx))) break;
      this.stats.reservationCalls++;
      [result] = await gateway.apply([req], r.policy.timeoutMs, ctx, requestId);
      if (result === undefined || result.ok || result.error.code !== 'SLUICE_ERR_STORE_TIMEOUT') {
        break;
      }
    }
    return result;
  }

  async #giveBack(): Promise<void> {
    const gateway = this.#gateway;
    await Promise.allSettled([...this.#inflight]);
    const nowMs = this.#clock.nowMs();
    const calls: Promise<unknown>[] = [];
    for (const r of this.#reserves.values()) {
      const units = Math.min(r.units, r.taken);
      r.units = 0;
      if (gateway === undefined || units <= 0 || nowMs >= r.expiresAtMs) continue;
      const req = unitsRequest(r, units);
      const refund = gateway.refund(
        [req],
        { nowMs, consumedAtMs: r.reservedAtMs, requestId: r.requestId },
        r.policy.timeoutMs,
      );
      if (refund === undefined) continue; // the store cannot give back
      calls.push(
        refund.then(([res]) => {
          if (res?.ok !== true) return;
          this.stats.unitsReturned += units;
          this.#metrics?.returned('batch', r.name, units);
        }),
      );
    }
    await Promise.all(calls);
  }
}

/** Whether the caller's budget for the check `ctx` has run out. */
function spent(ctx: StageContext): boolean {
  return ctx.deadlineAtMs !== undefined && performance.now() >= ctx.deadlineAtMs;
}
