import type { Criticality } from '../core/criticality.js';
import { DEFAULT_SHARES, type CriticalityShares } from '../config/criticality-shares.js';

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
