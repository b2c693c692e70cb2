/**
 * Weighted max-min fair shares of one budget, with strict priority bands.
 *
 * Bands are served from the highest `priority` down: a band gets what the bands above
 * it left over. Inside a band the water level λ rises until every claim has
 * min(demand, λ·weight) and the band's share is used up (weighted water-filling), so no
 * claim can gain without taking from one that has less per unit of weight. What no
 * demand takes is handed out by weight over every claim, so a claim that starts to grow
 * finds room before the next round. The sum never exceeds the budget.
 */

/** One agent's claim on a budget. */
export interface Claim {
  /** Units per second it wants (allowed + denied over the last report); ≥ 0. */
  readonly demand: number;
  /** Relative share inside its band; > 0. */
  readonly weight: number;
  /** Higher bands are served first. */
  readonly priority: number;
}

/** Options of {@link allocate}. */
export interface AllocateOptions {
  /**
   * Whether budget that no demand takes is handed out by weight (headroom to grow).
   * @default true
   */
  readonly spreadLeftover?: boolean;
}

/**
 * Shares `budget` (units per second) over `claims`; returns one share per claim, in
 * claim order. Deterministic; O(n log n).
 */
export function allocate(
  budget: number,
  claims: readonly Claim[],
  options: AllocateOptions = {},
): number[] {
  const shares = new Array<number>(claims.length).fill(0);
  let left = Math.max(0, budget);
  const bands = new Map<number, number[]>();
  for (let i = 0; i < claims.length; i++) {
    const p = claims[i]!.priority;
    let band = bands.get(p);
    if (band === undefined) bands.set(p, (band = []));
    band.push(i);
  }
  const order = [...bands.keys()].sort((a, b) => b - a);
  // Rounding dust (far below one unit per second) is not worth a lower band's share.
  const dust = Math.max(0, budget) * 1e-9;
  for (const p of order) {
    if (left <= dust) break;
    left -= fillBand(left, bands.get(p)!, claims, shares);
  }
  if ((options.spreadLeftover ?? true) && left > dust) {
    let totalWeight = 0;
    for (const c of claims) totalWeight += c.weight;
    if (totalWeight > 0) {
      const each = (left * (1 - 1e-12)) / totalWeight;
      for (let i = 0; i < claims.length; i++) shares[i]! += each * claims[i]!.weight;
    }
  }
  return shares;
}

/** Water-fills `members` from `budget`; writes their shares and returns what was used. */
function fillBand(
  budget: number,
  members: readonly number[],
  claims: readonly Claim[],
  shares: number[],
): number {
  // Ascending demand per unit of weight: the order in which claims are satisfied as λ rises.
  const sorted = [...members].sort(
    (a, b) =>
      claims[a]!.demand / claims[a]!.weight - claims[b]!.demand / claims[b]!.weight || a - b,
  );
  let weightLeft = 0;
  for (const i of sorted) weightLeft += claims[i]!.weight;
  let left = budget;
  let used = 0;
  for (let k = 0; k < sorted.length; k++) {
    const i = sorted[k]!;
    const { demand, weight } = claims[i]!;
    // A hair under the exact level, so rounding never lifts the sum above the budget.
    const level = (left / weightLeft) * (1 - 1e-12);
    if (demand <= level * weight) {
      shares[i] = demand;
      left -= demand;
      used += demand;
      weightLeft -= weight;
      continue;
    }
    // Every remaining claim wants more than λ·weight: all of them get exactly that.
    for (let j = k; j < sorted.length; j++) {
      const m = sorted[j]!;
      const share = level * claims[m]!.weight;
      shares[m] = share;
      used += share;
    }
    return Math.min(used, budget);
  }
  return used;
}
