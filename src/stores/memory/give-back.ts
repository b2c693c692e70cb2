import { refundState } from '../../algorithms/refund.js';
import type { AlgorithmDecision } from '../../core/decision.js';
import { dedupKey } from '../key.js';
import type {
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
  StoreSettleOptions,
  StoreSettleRequest,
  StoreSettleResult,
} from '../store.js';
import type { RequestRecords } from './request-records.js';

/**
 * MemoryStore's refunds and settles: what comes back to (or is charged to) buckets after
 * their check, once per request id. Apart from the store's decisions, which this file
 * does not touch; it reaches the buckets only through {@link HeldBuckets}.
 */

/** The buckets of a MemoryStore, as its refunds and settles reach them. */
export interface HeldBuckets {
  /** The live state of `r`'s bucket at `nowMs` (`undefined`: none, or expired), marked used. */
  read(r: StoreRequest, nowMs: number): unknown;
  /** Writes `state` as `r`'s bucket, kept at least `lifeMs` from `nowMs` (and its TTL). */
  write(r: StoreRequest, state: unknown, nowMs: number, lifeMs: number): void;
}

/** A cost-0 read of `state`: the bucket as left. */
function peek(r: StoreRequest, state: unknown, nowMs: number): AlgorithmDecision {
  return r.algorithm.transition(state, nowMs, 0, r.params).decision;
}

/** {@link MemoryStore.refundSync}: a repeat of the request id within the dedup TTL gives nothing more. */
export function refundHeld(
  held: HeldBuckets,
  records: RequestRecords,
  batch: readonly StoreRequest[],
  options: StoreRefundOptions,
): readonly StoreResult[] {
  const { nowMs, consumedAtMs } = options;
  const marker =
    options.requestId === undefined || batch.length === 0
      ? undefined
      : `${dedupKey(batch[0]!.key, options.requestId)}:refund`;
  if (marker !== undefined) {
    const seen = records.seen(marker, nowMs);
    if (seen !== undefined) return seen;
  }
  const results: StoreResult[] = [];
  for (const r of batch) {
    const state = held.read(r, nowMs);
    const next = refundState(r.algorithm.kind, state, nowMs, consumedAtMs, r.cost, r.params);
    if (next !== undefined) held.write(r, next, nowMs, 0);
    results.push({ ok: true, decision: peek(r, next ?? state, nowMs) });
  }
  if (marker !== undefined) records.remember(marker, results, nowMs);
  return results;
}

/**
 * {@link MemoryStore.settle}: each bucket's `Algorithm.settle`, once per reservation id
 * (the record is kept `keepMs`, or the dedup TTL when longer). A repeat reads the buckets
 * and changes nothing.
 */
export function settleHeld(
  held: HeldBuckets,
  records: RequestRecords,
  batch: readonly StoreSettleRequest[],
  options: StoreSettleOptions,
): readonly StoreSettleResult[] {
  const { nowMs, reservedAtMs } = options;
  if (batch.length === 0) return [];
  const marker = `${dedupKey(batch[0]!.key, options.requestId)}:settle`;
  if (records.seen(marker, nowMs) !== undefined) {
    return batch.map((r) => ({
      ok: true,
      decision: peek(r, held.read(r, nowMs), nowMs),
      cappedUnits: 0,
      repeated: true,
    }));
  }
  const results: StoreSettleResult[] = [];
  for (const r of batch) {
    const state = held.read(r, nowMs);
    const s = r.algorithm.settle(state, nowMs, reservedAtMs, r.cost, r.actual, r.maxDebt, r.params);
    if (s.state !== undefined) held.write(r, s.state, nowMs, s.lifeMs);
    results.push({
      ok: true,
      decision: peek(r, s.state ?? state, nowMs),
      cappedUnits: s.cappedUnits,
      repeated: false,
    });
  }
  records.remember(marker, [], nowMs, options.keepMs);
  return results;
}
