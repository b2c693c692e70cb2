import type { AlgorithmDecision } from '../core/decision.js';
import type { StoreRequest } from './store.js';

export interface BatchOutcome {
  readonly decisions: readonly AlgorithmDecision[];
  /** The state to write for each request, or `undefined` to leave it untouched. */
  readonly writes: readonly unknown[];
}

/**
 * The batch semantics of {@link Store.apply} as one pure function over the current
 * states, so every store shares it: all-or-nothing over enforced requests; shadow
 * requests consume only when they fit and the enforced set is admitted. Two requests on
 * the same key see each other's consumption, in order.
 */
export function decideBatch(
  batch: readonly StoreRequest[],
  states: readonly unknown[],
  nowMs: number,
): BatchOutcome {
  const current = new Map<string, unknown>();
  const stateOf = (i: number): unknown => {
    const key = batch[i]!.key;
    return current.has(key) ? current.get(key) : states[i];
  };
  const next: unknown[] = [];
  const decisions: AlgorithmDecision[] = [];
  let admitted = true;
  batch.forEach((r, i) => {
    const t = r.algorithm.transition(stateOf(i), nowMs, r.cost, r.params);
    decisions.push(t.decision);
    next.push(t.state);
    if (t.decision.allowed) current.set(r.key, t.state);
    if (r.enforce && !t.decision.allowed) admitted = false;
  });
  if (admitted) {
    // A cost-0 request only reads: writing its refreshed state would change nothing.
    return {
      decisions,
      writes: next.map((s, i) => (decisions[i]!.allowed && batch[i]!.cost > 0 ? s : undefined)),
    };
  }
  // Nothing is consumed: re-read every request that fit as a cost-0 peek of its
  // original state, so its remaining capacity is reported unconsumed.
  return {
    decisions: batch.map((r, i) =>
      decisions[i]!.allowed
        ? r.algorithm.transition(states[i], nowMs, 0, r.params).decision
        : decisions[i]!,
    ),
    writes: batch.map(() => undefined),
  };
}
