import { CRITICALITIES, criticalityRank, type Criticality } from './criticality.js';

/** The share of the concurrency limit each criticality may fill, in (0, 1]. */
export type CriticalityShares = Readonly<Record<Criticality, number>>;

/**
 * Defaults: `SHEDDABLE` stops at half the limit, `SHEDDABLE_PLUS` at three quarters,
 * `CRITICAL` at 90 %, and the last 10 % is kept for `CRITICAL_PLUS`.
 */
export const DEFAULT_SHARES: CriticalityShares = Object.freeze({
  CRITICAL_PLUS: 1,
  CRITICAL: 0.9,
  SHEDDABLE_PLUS: 0.75,
  SHEDDABLE: 0.5,
});

/**
 * Criticality-aware shedding: a request of level `c` is admitted only while fewer than
 * `ceil(limit × share[c])` requests are in flight. Shares never rise as criticality falls,
 * so as load grows the lowest level hits its ceiling first, and a level is refused only
 * while every lower level is refused too (SRE "Handling Overload"). The capacity between
 * two ceilings is kept back for the levels above.
 *
 * Unlike Netflix's partitions (which apply only once the whole limit is full, so batch
 * traffic can fill it first: Netflix #120), a ceiling holds at every load.
 */
export class LoadShedder {
  readonly shares: CriticalityShares;

  /** @param shares validated by the caller: each in (0, 1], non-increasing by level */
  constructor(shares: CriticalityShares = DEFAULT_SHARES) {
    this.shares = shares;
  }

  /** The most requests that may be in flight when one of level `c` is admitted. */
  ceiling(limit: number, c: Criticality): number {
    return Math.max(1, Math.ceil(limit * this.shares[c]));
  }
}

/** Why a set of shares is not usable, or `undefined` when it is. */
export function sharesProblem(shares: Readonly<Record<string, number>>): string | undefined {
  for (const c of CRITICALITIES) {
    const s = shares[c];
    if (s === undefined || !(s > 0 && s <= 1)) return `${c} must be in (0, 1], got ${String(s)}`;
    const r = criticalityRank(c);
    if (r > 0) {
      const above = CRITICALITIES[r - 1] as Criticality;
      if (s > (shares[above] as number)) {
        return `${c} (${s}) must not exceed ${above} (${String(shares[above])}): a lower level would keep capacity from a higher one`;
      }
    }
  }
  return undefined;
}
