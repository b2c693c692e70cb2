import { algorithmOf } from '../algorithms/index.js';
import { maxDebtOf } from '../config/settle-settings.js';
import type { Policy } from '../core/policy.js';
import type { BoundsSection } from './bounds.js';

/** What reservations of a policy can hold and let through (docs/costs.md, "The bound"). */
export interface SettleBounds {
  /**
   * Most units unsettled reservations can hold at once: the policy's capacity, since each
   * was admitted only while its estimate fit. They are charged as estimated until settled,
   * and stay so after their ttl.
   */
  readonly heldByReservations: number;
  /**
   * Most units under-estimates can let through beyond the capacity at once: the debt cap,
   * `settle.maxDebt`. An excess beyond it is not charged and each settle reports it.
   */
  readonly debtBound: number;
}

/** The bounds of a policy that settles (one with a `settle` block); `undefined` for others. */
export function settleBounds(policy: Policy): SettleBounds | undefined {
  if (policy.settle === undefined) return undefined;
  return {
    heldByReservations: algorithmOf(policy.algorithm).capacity(policy.params),
    debtBound: maxDebtOf(policy),
  };
}

/** `sluice explain`'s section for `bounds`. */
export function settleBoundsSection(bounds: SettleBounds): BoundsSection {
  const { heldByReservations: held, debtBound: debt } = bounds;
  return {
    title: 'reserve and settle',
    lines: [
      {
        label: 'held by unsettled reservations',
        value: `${held.toLocaleString('en-US')} at most`,
        note: 'their estimates, until settled; after their ttl they stay charged',
      },
      {
        label: 'let through by under-estimates',
        value: `${debt.toLocaleString('en-US')} beyond capacity at most`,
        note: `settle.maxDebt; later checks wait until it is repaid, an excess past it is reported as cappedUnits`,
      },
    ],
  };
}
