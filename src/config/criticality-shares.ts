import { CRITICALITIES, criticalityRank, type Criticality } from '../core/criticality.js';

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
