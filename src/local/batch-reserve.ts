import { algorithmOf } from '../algorithms/index.js';
import type { AlgorithmDecision } from '../core/decision.js';
import type { Policy } from '../core/policy.js';
import type { StoreRequest } from '../stores/store.js';

/** One bucket key's reserve of batch units and the little it does on its own (token-batch.ts). */

/** One bucket key's reserve. */
export interface Reserve {
  /** Unspent units. */
  units: number;
  expiresAtMs: number;
  /** The last reservation: its id, size and time (what `close` may give back). */
  requestId: string;
  taken: number;
  reservedAtMs: number;
  /** Size of the next reservation (adapts; see the class comment). */
  next: number;
  /** The store's view at the last reservation. */
  limit: number;
  remaining: number;
  resetAfterMs: number;
  /** Until then, items pass straight on (a reservation call failed). */
  downUntilMs: number;
  /**
   * The store denied `deniedNeed` units until `deniedUntilMs` (its retry time): items
   * needing as many are denied here until then, as the over-limit cache does.
   */
  deniedNeed: number;
  deniedUntilMs: number;
  denied: AlgorithmDecision | undefined;
  /** Spare units (beyond their own items' needs) of the reservations in flight. */
  inflightExtra: number;
  /** Units the items waiting for a reservation in flight need. */
  waiting: number;
  /** Resolved when a reservation in flight completes. */
  wake: Promise<void> | undefined;
  wakeUp: (() => void) | undefined;
  readonly policy: Policy;
  /** The name the check knows the policy by (for the metrics: a rule's public name). */
  readonly name: string;
  readonly key: string;
}

/** A key's reserve before its first reservation. */
export function newReserve(policy: Policy, key: string, name: string = policy.name): Reserve {
  return {
    units: 0,
    expiresAtMs: -Infinity,
    requestId: '',
    taken: 0,
    reservedAtMs: 0,
    next: 1,
    limit: 0,
    // Unknown until the store answers: no bound on the first reservation.
    remaining: Infinity,
    resetAfterMs: 0,
    downUntilMs: -Infinity,
    deniedNeed: Infinity,
    deniedUntilMs: -Infinity,
    denied: undefined,
    inflightExtra: 0,
    waiting: 0,
    wake: undefined,
    wakeUp: undefined,
    policy,
    name,
    key,
  };
}

/** Units set aside for an item that did not get them back into the reserve, unexpired. */
export function putBack(r: Reserve, units: number, nowMs: number): void {
  if (units > 0 && nowMs < r.expiresAtMs) r.units += units;
}

/** The store request for `units` of the reserve's bucket (a reservation or a give-back). */
export function unitsRequest(r: Reserve, units: number): StoreRequest {
  return {
    key: r.key,
    algorithm: algorithmOf(r.policy.algorithm),
    params: r.policy.params,
    cost: units,
    enforce: true,
  };
}

/** The store's denial of the units needed, as the item's answer; `leftover` is still held. */
export function denial(d: AlgorithmDecision, leftover: number): AlgorithmDecision {
  return {
    status: d.status,
    allowed: false,
    limit: d.limit,
    remaining: d.remaining + leftover,
    retryAfterMs: d.retryAfterMs,
    resetAfterMs: d.resetAfterMs,
  };
}
