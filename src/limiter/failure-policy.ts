import type { AlgorithmDecision, Decision } from '../core/decision.js';
import type { Policy } from '../core/policy.js';
import type { PreparedItem } from './policy-plan.js';
import { StaleBudgets } from './stale-budgets.js';

/**
 * The failure policy (docs/failure-modes.md): what an item's decision is when the store
 * gave none (open, closed, stale budgets, shadow), and the decisions the check makes
 * without the store's word (an item no stage or store reached).
 */
export class FailurePolicy {
  readonly #stale = new StaleBudgets();

  /** One item's decision without the store: its stale budget, else its failure mode. */
  withoutStore(item: PreparedItem, nowMs: number): Decision {
    const policy = item.plan.policy;
    if (policy.failureMode === 'stale') {
      const d = this.#stale.peek(item.key, policy, item.cost, nowMs);
      if (d !== undefined)
        return { ...d, policy: item.plan.name, path: policy.shadow ? 'shadow' : 'stale' };
    }
    return failureDecision(policy, item.plan.capacity, item.plan.name);
  }

  /** Remembers a store decision of a `stale` policy's item: its budget for an outage. */
  remember(item: PreparedItem, decision: AlgorithmDecision, nowMs: number): void {
    if (item.plan.policy.failureMode === 'stale') this.#stale.record(item.key, decision, nowMs);
  }

  /** Spends an admitted stale decision's cost from the item's stale budget. */
  spendStale(item: PreparedItem, nowMs: number): void {
    this.#stale.spend(item.key, item.plan.policy, item.cost, nowMs);
  }
}

/** A decision for a cost that can never fit: over the limit, and no wait makes it fit. */
export function neverFits(d: AlgorithmDecision): AlgorithmDecision {
  return { ...d, status: 'OVER_LIMIT', allowed: false, retryAfterMs: Infinity };
}

/** A store decision with the policy's name and the path it took (a plain literal: no spread). */
export function withPolicy(d: AlgorithmDecision, policy: string, path: Decision['path']): Decision {
  return d.delayMs === undefined
    ? {
        status: d.status,
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        resetAfterMs: d.resetAfterMs,
        policy,
        path,
      }
    : {
        status: d.status,
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        resetAfterMs: d.resetAfterMs,
        delayMs: d.delayMs,
        policy,
        path,
      };
}

/**
 * The decision of an item the check never decided: a stage denied another policy of an
 * all-or-nothing check first, so the store was not asked. Nothing is known about its
 * bucket: allowed as far as known, with no remaining capacity claimed.
 */
export function notReached(item: PreparedItem): Decision {
  const policy = item.plan.policy;
  return {
    status: 'OK',
    allowed: true,
    limit: item.plan.capacity,
    remaining: 0,
    retryAfterMs: 0,
    resetAfterMs: 0,
    policy: item.plan.name,
    path: policy.shadow ? 'shadow' : 'store',
  };
}

/** The decision of `policy`'s failure mode, under `name` (the plan's; default the policy's). */
export function failureDecision(
  policy: Policy,
  limit: number,
  name: string = policy.name,
): Decision {
  const base = { limit, retryAfterMs: 0, resetAfterMs: 0, policy: name };
  const mode =
    policy.failureMode === 'stale' ? (policy.stale?.fallback ?? 'closed') : policy.failureMode;
  if (policy.shadow || mode === 'open') {
    // Nothing is known about the bucket; report no remaining capacity rather than invent some.
    return {
      ...base,
      status: 'OK',
      allowed: true,
      remaining: 0,
      path: policy.shadow ? 'shadow' : 'fail-open',
    };
  }
  return { ...base, status: 'UNAVAILABLE', allowed: false, remaining: 0, path: 'fail-closed' };
}
