import type { AlgorithmDecision } from '../../core/decision.js';
import { PolicyError, StoreError } from '../../core/errors.js';
import type { Policy } from '../../core/policy.js';
import type { StoreRequest, StoreResult } from '../store.js';
import type { SlotGroup } from './slot-groups.js';

/**
 * What a Redis Cluster store does with a batch whose keys live in several hash slots
 * (e.g. a global emergency limit, tagged `{@name}`, plus a tenant limit, tagged
 * `{42}`). One script can only touch one slot, so such a batch cannot be one
 * atomic step.
 *
 * - `sequential-refund`: one applyBatch call per slot, most restrictive slot first (see
 *   {@link orderMostRestrictiveFirst}); when a slot denies (or fails), what the earlier
 *   slots consumed is given back by refundBatch.lua. Each slot is exact on its own; the
 *   batch is all-or-nothing in outcome, but between an earlier slot's consume and its
 *   refund (the partial-consumption window, measured by {@link CrossSlotStats}) other
 *   checks see that capacity as taken, so they may be denied where an atomic batch
 *   would have admitted them. Nothing is ever admitted beyond a key's limit.
 * - `reject`: such policy sets are refused when the limiter is created
 *   (`SLUICE_ERR_POLICY_CROSS_SLOT`); a cross-slot batch that still reaches the store
 *   fails with `SLUICE_ERR_STORE_CROSS_SLOT` (the policy's failure mode decides).
 *
 * Either way Redis's own `CROSSSLOT` error never reaches a caller.
 */
export type CrossSlotStrategy = 'sequential-refund' | 'reject';

/** One slot's applyBatch outcome. */
export type GroupOutcome =
  | {
      readonly ok: true;
      readonly decisions: readonly AlgorithmDecision[];
      readonly decidedAtMs: number;
    }
  | { readonly ok: false; readonly error: StoreError };

/** The slot-level operations the strategy runs; RedisStore provides them. */
export interface SlotOps {
  /** applyBatch over the group's requests (consumes when the group admits). */
  consume(group: SlotGroup): Promise<GroupOutcome>;
  /**
   * applyBatch over the group's requests that never writes (a read with the real costs):
   * the decisions the group would give, for groups after the one that denied.
   */
  dryRun(group: SlotGroup): Promise<GroupOutcome>;
  /** refundBatch over the given requests of a group that consumed at `decidedAtMs`. */
  refund(group: SlotGroup, indices: readonly number[], decidedAtMs: number): Promise<GroupOutcome>;
}

/** Counters of the sequential-refund strategy, per store (process). */
export interface CrossSlotStats {
  /** Cross-slot batches run. */
  batches: number;
  /** Batches where a later slot denied or failed after an earlier slot consumed. */
  refunded: number;
  /** Refund calls that failed: that consumption stays until the bucket refills. */
  refundFailures: number;
  /**
   * Partial-consumption windows of the last refunded batches (bounded, newest last), in
   * ms: from the first consuming slot's reply to the last refund's reply. Capacity is
   * held by a request that will not be admitted only during such a window.
   */
  readonly partialWindowsMs: number[];
  /** Longest partial-consumption window seen, in ms. */
  maxPartialWindowMs: number;
}

const MAX_SAMPLES = 1024;

export function newCrossSlotStats(): CrossSlotStats {
  return {
    batches: 0,
    refunded: 0,
    refundFailures: 0,
    partialWindowsMs: [],
    maxPartialWindowMs: 0,
  };
}

/**
 * Orders slot groups most restrictive first: by the smallest capacity
 * (`algorithm.capacity`: burst, limit or queue size) among a group's enforced requests,
 * smaller first; groups of shadow requests only (which never deny) go last; ties keep
 * request order. A small capacity is the one most likely to be exhausted, so checking it
 * first means the larger (usually shared, e.g. global) budgets are consumed, and then
 * refunded, least often. Static on purpose: the order does not depend on traffic, so it
 * is the same in every process.
 */
export function orderMostRestrictiveFirst(
  batch: readonly StoreRequest[],
  groups: readonly SlotGroup[],
): SlotGroup[] {
  const rank = (g: SlotGroup): number =>
    Math.min(
      ...g.indices.map((i) =>
        batch[i]!.enforce ? batch[i]!.algorithm.capacity(batch[i]!.params) : Infinity,
      ),
    );
  return groups
    .map((g, order) => ({ g, order, rank: rank(g) }))
    .sort((a, b) => a.rank - b.rank || a.order - b.order)
    .map((x) => x.g);
}

/**
 * Runs a cross-slot batch with the `sequential-refund` strategy. Results are in request
 * order with {@link Store.apply}'s batch semantics: when every slot admits, everything
 * consumed; otherwise nothing stays consumed (earlier slots refunded) and each request
 * reports its bucket unconsumed. When a slot call fails, every request gets that error
 * (after refunding the earlier slots: an undecided check holds no capacity).
 */
export async function applySequentialRefund(
  batch: readonly StoreRequest[],
  groups: readonly SlotGroup[],
  ops: SlotOps,
  stats: CrossSlotStats,
): Promise<StoreResult[]> {
  stats.batches++;
  const ordered = orderMostRestrictiveFirst(batch, groups);
  const results: (StoreResult | undefined)[] = batch.map(() => undefined);
  const consumed: { group: SlotGroup; indices: number[]; decidedAtMs: number }[] = [];
  let firstConsumeAt: number | undefined;
  let failure: StoreError | undefined;
  let deniedAt = -1;
  for (let k = 0; k < ordered.length; k++) {
    const group = ordered[k]!;
    const out = await ops.consume(group);
    if (!out.ok) {
      failure = out.error;
      break;
    }
    const admitted = group.indices.every((i, j) => !batch[i]!.enforce || out.decisions[j]!.allowed);
    group.indices.forEach((i, j) => (results[i] = { ok: true, decision: out.decisions[j]! }));
    if (!admitted) {
      deniedAt = k;
      break;
    }
    const took = group.indices.filter((i, j) => out.decisions[j]!.allowed && batch[i]!.cost > 0);
    if (took.length > 0) {
      firstConsumeAt ??= performance.now();
      consumed.push({ group, indices: took, decidedAtMs: out.decidedAtMs });
    }
  }
  if (failure === undefined && deniedAt < 0) return results as StoreResult[];

  const refunds = consumed.map(async ({ group, indices, decidedAtMs }) => {
    const out = await ops
      .refund(group, indices, decidedAtMs)
      .catch((error: unknown): GroupOutcome => ({ ok: false, error: error as StoreError }));
    if (!out.ok) {
      stats.refundFailures++;
      return;
    }
    // Report the refunded buckets as a read after the refund (unconsumed).
    indices.forEach((i, j) => (results[i] = { ok: true, decision: out.decisions[j]! }));
  });
  const rest =
    failure === undefined
      ? ordered.slice(deniedAt + 1).map(async (group) => {
          const out = await ops.dryRun(group);
          group.indices.forEach(
            (i, j) => (results[i] = out.ok ? { ok: true, decision: out.decisions[j]! } : out),
          );
        })
      : [];
  await Promise.all([...refunds, ...rest]);
  if (consumed.length > 0) {
    stats.refunded++;
    const windowMs = performance.now() - firstConsumeAt!;
    stats.partialWindowsMs.push(windowMs);
    if (stats.partialWindowsMs.length > MAX_SAMPLES) stats.partialWindowsMs.shift();
    stats.maxPartialWindowMs = Math.max(stats.maxPartialWindowMs, windowMs);
  }
  if (failure !== undefined) return batch.map(() => ({ ok: false as const, error: failure }));
  // A later group's dry run may fail: then nothing is known about the batch as a whole.
  const failed = results.find((r) => r !== undefined && !r.ok);
  if (failed !== undefined) return batch.map(() => failed);
  return results as StoreResult[];
}

/**
 * Two policies of `policies` that one descriptor can match together while their buckets
 * live in different slots, or undefined. Buckets share a slot when their policies have the
 * same non-empty identity keys (the hash tag is the identity); a global policy (no
 * identity) is tagged with its own name, so it shares a slot with no other policy. Two
 * policies can match one descriptor unless they require different fixed values for a key.
 */
export function crossSlotPair(policies: readonly Policy[]): readonly [Policy, Policy] | undefined {
  for (let a = 0; a < policies.length; a++) {
    for (let b = a + 1; b < policies.length; b++) {
      const p = policies[a]!;
      const q = policies[b]!;
      const sameTag =
        p.identity.length > 0 &&
        p.identity.length === q.identity.length &&
        p.identity.every((k, i) => q.identity[i] === k);
      if (sameTag) continue;
      const conflict = p.match.some(
        (m) =>
          m.value !== undefined &&
          q.match.some((n) => n.key === m.key && n.value !== undefined && n.value !== m.value),
      );
      if (!conflict) return [p, q];
    }
  }
  return undefined;
}

/**
 * Refuses policy sets under `crossSlot: "reject"` on a Cluster: throws
 * `SLUICE_ERR_POLICY_CROSS_SLOT` when two policies can match one descriptor while their
 * buckets live in different slots.
 */
export function rejectCrossSlotPolicies(policies: readonly Policy[]): void {
  const pair = crossSlotPair(policies);
  if (pair === undefined) return;
  throw new PolicyError(
    'SLUICE_ERR_POLICY_CROSS_SLOT',
    `policies "${pair[0].name}" and "${pair[1].name}" can match one descriptor but keep their buckets in different Redis Cluster slots (different identity keys), and the store's crossSlot strategy is "reject"; give them the same identity keys or use crossSlot "sequential-refund"`,
  );
}

/**
 * Why a batch whose buckets live in `slots` (more than one) slots cannot run across them,
 * or undefined when the strategy can run it.
 */
export function crossSlotRefusal(
  batch: readonly StoreRequest[],
  slots: number,
  strategy: CrossSlotStrategy,
): StoreError | undefined {
  // The cross-slot strategy's dry runs and refunds assume a denied request was never
  // charged: a request that charges denials belongs in an independent call.
  if (batch.some((r) => r.algorithm.chargesDenied?.(r.params) === true)) {
    return new StoreError(
      'SLUICE_ERR_STORE_CROSS_SLOT',
      `the batch's buckets live in ${slots} Redis Cluster slots and it holds a request that charges denials, which an all-or-nothing batch across slots cannot run; decide such requests independently`,
    );
  }
  if (strategy === 'reject') {
    return new StoreError(
      'SLUICE_ERR_STORE_CROSS_SLOT',
      `the batch's buckets live in ${slots} Redis Cluster slots and the store's crossSlot strategy is "reject"`,
    );
  }
  return undefined;
}
