/**
 * What a quota lease permits beyond its budget when agents lose the controller
 * (DESIGN.md §5, stage 6; docs/quota-leases.md, "The partition bound").
 *
 * A lease stays in the controller's ledger until issue + L + δ, so a stale lease adds
 * nothing: while the cut-off agents spend what they last held, the controller keeps that
 * share from everyone else. The excess comes only from the fallback: an agent's last
 * lease came at most R before the partition began, so it runs out at least L − R into
 * it, and for the rest, P + R − L, the agent admits its fallback rate fᵢ on top of a
 * budget the controller has by then handed to others:
 *
 *   admitted(any window W) ≤ C·W + Σ fᵢ · min(W, max(0, P + R − L))
 *
 * Example: C = 100,000/s, one region of 100 agents out of 10,000 on a static fallback of
 * C/N = 10/s each, R = 1 s, L = 3 s, P = 5 s: fallback runs 3 s, Σ fᵢ = 1,000/s, so
 * at most 3,000 extra units in all and no window of R above 101% of C·R.
 * A `deny` fallback (fᵢ = 0) gives no excess at all; the `store` fallback gives none
 * beyond what the global store itself admits (its own limit is the budget).
 */

/** Inputs of {@link partitionBound}; times in milliseconds, rates in units per second. */
export interface PartitionBoundInput {
  /** The budget C. */
  readonly budgetPerSecond: number;
  /** The refresh period R. */
  readonly refreshMs: number;
  /** The lease TTL L. */
  readonly leaseTtlMs: number;
  /** How long the agents are cut off (P). */
  readonly partitionMs: number;
  /** Σ fᵢ: the fallback rates of the cut-off agents added up (0 for `deny` or `store`). */
  readonly fallbackRatePerSecond: number;
}

/** The bound, in the terms the simulation measures. */
export interface PartitionBound {
  /** How long the cut-off agents run on their fallback, at most: max(0, P + R − L). */
  readonly fallbackMs: number;
  /** The most units admitted above the budget over the whole partition. */
  readonly extraUnits: number;
  /** The highest ratio of admitted to C·R in any window of R: 1 + Σ fᵢ / C when fallback runs. */
  readonly peakRatio: number;
}

/** The overshoot bound of a partition (see the module comment). */
export function partitionBound(i: PartitionBoundInput): PartitionBound {
  const fallbackMs = Math.max(0, i.partitionMs + i.refreshMs - i.leaseTtlMs);
  const extraUnits = (i.fallbackRatePerSecond * fallbackMs) / 1000;
  const peakRatio = fallbackMs > 0 ? 1 + i.fallbackRatePerSecond / i.budgetPerSecond : 1;
  return { fallbackMs, extraUnits, peakRatio };
}

/** One line of an explanation: what, how much, and why (the shape `sluice explain` prints). */
export interface PartitionBoundLine {
  readonly label: string;
  readonly value: string;
  readonly note?: string;
}

/**
 * The bound as a titled section of lines, ready for `sluice explain` to print beside the
 * other stages' sections (structurally its `BoundsSection`).
 */
export function partitionBoundSection(i: PartitionBoundInput): {
  readonly title: string;
  readonly lines: readonly PartitionBoundLine[];
} {
  const b = partitionBound(i);
  const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 2 });
  const s = (ms: number) => `${n(ms / 1000)}s`;
  return {
    title: `lease, controller unreachable for ${s(i.partitionMs)}`,
    lines: [
      {
        label: 'stale lease',
        value: '0',
        note: `a lease stays in the controller's ledger until its TTL (${s(i.leaseTtlMs)}) plus margin`,
      },
      {
        label: 'fallback runs, at most',
        value: s(b.fallbackMs),
        note: `P + R − L = ${s(i.partitionMs)} + ${s(i.refreshMs)} − ${s(i.leaseTtlMs)}`,
      },
      {
        label: 'units over the budget, at most',
        value: n(b.extraUnits),
        note: `the cut-off agents' fallback, ${n(i.fallbackRatePerSecond)}/s, for that long`,
      },
      {
        label: 'any window of R, at most',
        value: `${n(b.peakRatio * 100)}% of the budget`,
        note: `1 + Σ fallback / budget (${n(i.budgetPerSecond)}/s)`,
      },
    ],
  };
}
