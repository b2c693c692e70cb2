import type { AlgorithmDecision } from '../core/decision.js';
import type { StoreRequest } from './store.js';

export interface BatchOutcome {
  readonly decisions: readonly AlgorithmDecision[];
  /** The state to write for each request, or `undefined` to leave it untouched. */
  readonly writes: readonly unknown[];
}

/** Whether a request is charged when denied too (its params came from `chargingDenied`). */
function chargesDenied(r: StoreRequest): boolean {
  return r.algorithm.chargesDenied?.(r.params) === true;
}

/**
 * The batch semantics of {@link Store.apply} as one pure function over the current
 * states, so every store shares it: all-or-nothing over enforced requests; shadow
 * requests consume only when they fit and the enforced set is admitted. Two requests on
 * the same key see each other's consumption, in order. A request whose params charge
 * denials is charged whenever it is decided, whatever the rest of the batch does.
 *
 * `independent` (StoreApplyOptions): each request is a batch of one, in order, reading
 * what the requests before it wrote.
 */
export function decideBatch(
  batch: readonly StoreRequest[],
  states: readonly unknown[],
  nowMs: number,
  independent = false,
): BatchOutcome {
  const current = new Map<string, unknown>();
  const stateOf = (i: number): unknown => {
    const key = batch[i]!.key;
    return current.has(key) ? current.get(key) : states[i];
  };
  if (independent) {
    const decisions: AlgorithmDecision[] = [];
    const writes: unknown[] = [];
    batch.forEach((r, i) => {
      const one = decideBatch([r], [stateOf(i)], nowMs);
      decisions.push(one.decisions[0]!);
      writes.push(one.writes[0]);
      if (one.writes[0] !== undefined) current.set(r.key, one.writes[0]);
    });
    return { decisions, writes };
  }
  const next: unknown[] = [];
  const decisions: AlgorithmDecision[] = [];
  const charges = batch.map(chargesDenied);
  let admitted = true;
  batch.forEach((r, i) => {
    const t = r.algorithm.transition(stateOf(i), nowMs, r.cost, r.params);
    decisions.push(t.decision);
    next.push(t.state);
    if (t.decision.allowed || charges[i]) current.set(r.key, t.state);
    if (r.enforce && !t.decision.allowed) admitted = false;
  });
  // A cost-0 request only reads: writing its refreshed state would change nothing.
  const charged = (i: number): unknown => (charges[i] && batch[i]!.cost > 0 ? next[i] : undefined);
  if (admitted) {
    return {
      decisions,
      writes: next.map((s, i) =>
        (decisions[i]!.allowed || charges[i]) && batch[i]!.cost > 0 ? s : undefined,
      ),
    };
  }
  // Nothing else is consumed: re-read every request that fit as a cost-0 peek of its
  // original state, so its remaining capacity is reported unconsumed.
  return {
    decisions: batch.map((r, i) =>
      decisions[i]!.allowed && !charges[i]
        ? r.algorithm.transition(states[i], nowMs, 0, r.params).decision
        : decisions[i]!,
    ),
    writes: batch.map((_, i) => charged(i)),
  };
}
