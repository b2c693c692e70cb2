import type { Decision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { StoreResult } from '../stores/store.js';
import { combineDecisions, type CheckResult } from './check-result.js';
import { neverFits, notReached, withPolicy, type FailurePolicy } from './failure-policy.js';
import { settleStages } from './pipeline.js';
import { release, type PreparedItem } from './policy-plan.js';
import type { DecisionListener } from './limiter-options.js';
import type { StageContext } from './stage.js';

/**
 * Settle, the last part of a check: the stages' answers and the store's results become
 * decisions (a store failure becomes the failure policy's), the check's result is
 * combined, the stages are told how it ended and the items are given back.
 */
export class Settle {
  readonly #failure: FailurePolicy;

  constructor(failure: FailurePolicy) {
    this.#failure = failure;
  }

  /**
   * Turns the stages' answers and the store's results (for `batch`, the items no stage
   * answered, in item order; empty when the store was not called) into the check's
   * result, settles the stages and gives the items back.
   */
  finish(
    nowMs: number,
    items: readonly PreparedItem[],
    batch: readonly PreparedItem[],
    results: readonly StoreResult[],
    independent: boolean,
    ctx: StageContext | undefined,
    listener: DecisionListener | undefined,
  ): CheckResult {
    // A batch is atomic: if any item failed, nothing is known about the others. Items
    // decided independently fail alone.
    const failed = independent ? undefined : firstError(results);
    if (failed !== undefined) return this.#failed(nowMs, items, failed, ctx, listener);
    if (items.length !== 1)
      return this.#each(nowMs, items, batch, results, independent, ctx, listener);
    // One item (the usual check): a one-element literal, no array growth.
    return this.#decided(
      items,
      [this.#decisionOf(items[0]!, batch, results[0], nowMs)],
      independent,
      ctx,
      listener,
    );
  }

  /** {@link Settle.finish} for several items (apart, so the one-item path stays small). */
  #each(
    nowMs: number,
    items: readonly PreparedItem[],
    batch: readonly PreparedItem[],
    results: readonly StoreResult[],
    independent: boolean,
    ctx: StageContext | undefined,
    listener: DecisionListener | undefined,
  ): CheckResult {
    const decisions = new Array<Decision>(items.length);
    let j = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const answered = item.answer !== undefined || batch.length === 0;
      decisions[i] = this.#decisionOf(item, batch, answered ? undefined : results[j++], nowMs);
    }
    return this.#decided(items, decisions, independent, ctx, listener);
  }

  /** Settles a check that ended in an error before it was decided (nothing admitted). */
  abandon(items: readonly PreparedItem[], ctx: StageContext): void {
    try {
      settleStages(items, ctx, items.map(notReached), false);
    } finally {
      release(items);
    }
  }

  /**
   * One item's decision: a stage's answer; not reached (`batch` empty: the store was not
   * called); else from its store result (`result`), or its failure mode when that failed.
   */
  #decisionOf(
    item: PreparedItem,
    batch: readonly PreparedItem[],
    result: StoreResult | undefined,
    nowMs: number,
  ): Decision {
    const policy = item.plan.policy;
    const answer = item.answer;
    if (answer !== undefined) {
      return withPolicy(answer, item.plan.name, policy.shadow ? 'shadow' : item.answerPath!);
    }
    if (batch.length === 0 || result === undefined) return notReached(item);
    if (!result.ok) return this.#withoutStore(item, result.error, nowMs);
    let decision = result.decision;
    // INVALID_POLICY from a transition: the cost is above capacity (a plan query lets
    // such costs through: envoy's hits are the request's), so it can never fit.
    if (decision.status === 'INVALID_POLICY') decision = neverFits(decision);
    this.#failure.remember(item, decision, nowMs);
    return withPolicy(decision, item.plan.name, policy.shadow ? 'shadow' : 'store');
  }

  /** An item's decision by its failure mode, its store call having failed with `error`. */
  #withoutStore(item: PreparedItem, error: StoreError, nowMs: number): Decision {
    item.storeError = error;
    const d = this.#failure.withoutStore(item, nowMs);
    if (d.path === 'stale' && d.allowed) this.#failure.spendStale(item, nowMs);
    return d;
  }

  /**
   * The check's result from its decisions; the listener told, the stages settled and the
   * items given back.
   */
  #decided(
    items: readonly PreparedItem[],
    decisions: readonly Decision[],
    independent: boolean,
    ctx: StageContext | undefined,
    listener: DecisionListener | undefined,
  ): CheckResult {
    const result = combineDecisions(decisions);
    // Before the items go back: a released item's key may be the next check's.
    if (listener !== undefined) tell(listener, items, decisions);
    if (ctx === undefined) {
      release(items);
      return result;
    }
    try {
      settleStages(items, ctx, decisions, independent ? undefined : result.allowed);
    } finally {
      release(items);
    }
    return result;
  }

  /**
   * Decides without the store, after the store call for the items no stage answered
   * failed with `error`: their failure modes, all-or-nothing like a store batch (stale
   * budgets are spent only when the request is admitted as a whole).
   */
  #failed(
    nowMs: number,
    items: readonly PreparedItem[],
    error: StoreError,
    ctx: StageContext | undefined,
    listener: DecisionListener | undefined,
  ): CheckResult {
    const decisions: Decision[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const policy = item.plan.policy;
      const answer = item.answer;
      if (answer !== undefined) {
        decisions.push(
          withPolicy(answer, item.plan.name, policy.shadow ? 'shadow' : item.answerPath!),
        );
      } else {
        item.storeError = error;
        decisions.push(this.#failure.withoutStore(item, nowMs));
      }
    }
    if (combineDecisions(decisions).allowed) {
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!;
        const d = decisions[i]!;
        if (item.answer === undefined && d.path === 'stale' && d.allowed) {
          this.#failure.spendStale(item, nowMs);
        }
      }
    }
    return this.#decided(items, decisions, false, ctx, listener);
  }
}

/** The error of the first failed result, if any. */
function firstError(results: readonly StoreResult[]): StoreError | undefined {
  for (let i = 0; i < results.length; i++) {
    const r = results[i]!;
    if (!r.ok) return r.error;
  }
  return undefined;
}

/** Tells `listener` each decision with its bucket's key; a throw is the listener's own. */
function tell(
  listener: DecisionListener,
  items: readonly PreparedItem[],
  decisions: readonly Decision[],
): void {
  for (let i = 0; i < items.length; i++) {
    try {
      listener(decisions[i]!, items[i]!.key, i);
    } catch {
      // A listener's failure is not the check's: the decision stands.
    }
  }
}
