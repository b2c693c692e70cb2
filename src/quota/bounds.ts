/**
 * What a quota lease permits beyond its budget when agents lose the controller
 * (docs/design.md, "Quota leases"; docs/quota-leases.md, "The partition bound").
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
  /** How many agents share the budget (n); given, the section adds the paced-shares line. */
  readonly agents?: number;
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

/**
 * The most whole units n agents on leases admit in one aligned window of R, with the
 * controller up (docs/quota-leases.md, "Paced shares"): ⌈C·R⌉ + n − 1.
 *
 * A share sent over a fill longer than R (0.6/s as 3 per 5 s) is paced at ⌈rate × R⌉ per
 * window of R (`QuotaAgent`), and any other lease admits at most its burst, rate × R, in
 * one: so each agent admits less than rate × R + 1, and the fleet, whose leases in force
 * add up to at most C, less than C·R + n; being whole, at most ⌈C·R⌉ + n − 1. Integer
 * units make some excess inherent: three agents at 0.67/s must each be able to admit 1
 * in some window of R, 3 against C·R = 2. Each fill window holds at most its tokens, so
 * over a window of the fill the shares hold exactly. test/quota/agent-pacing.property.test.ts
 * checks the agent's side.
 */
export function pacedSharesBound(i: {
  readonly budgetPerSecond: number;
  readonly refreshMs: number;
  readonly agents: number;
}): number {
  const cR = (i.budgetPerSecond * i.refreshMs) / 1000;
  return Math.ceil(cR - 1e-9) + Math.max(0, i.agents - 1);
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
      ...(i.agents === undefined ? [] : [pacedSharesLine(i, i.agents)]),
    ],
  };
}

/** The `paced shares` line: {@link pacedSharesBound} with what it counts. */
function pacedSharesLine(i: PartitionBoundInput, agents: number): PartitionBoundLine {
  const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 2 });
  const units = pacedSharesBound({ ...i, agents });
  const cR = (i.budgetPerSecond * i.refreshMs) / 1000;
  return {
    label: 'paced shares',
    value: `${n(units)} units in a window of R, at most`,
    note: `⌈C·R⌉ + n − 1 (C·R = ${n(cR)}, n = ${n(agents)}), controller up: a share over a fill longer than R admits ⌈rate × R⌉ per R, under 1 unit over; a fill window at most its tokens`,
  };
}

/**
 * Inputs of {@link leaseFailureBounds}; times in milliseconds, rates in units per second.
 * The fleet's fallback is Σ fᵢ over every agent (the leader's failures reach them all).
 */
export interface LeaseFailureInput {
  /** The budget C. */
  readonly budgetPerSecond: number;
  /** The refresh period R. */
  readonly refreshMs: number;
  /** The lease TTL L. */
  readonly leaseTtlMs: number;
  /** The controllers' election TTL E (`--election-ttl-ms`; by default L / 3, at least 300). */
  readonly electionTtlMs: number;
  /** How long an agent waits before it tries the next controller (`reconnectMs`). */
  readonly reconnectMs: number;
  /** How many controllers an agent tries in turn (K). */
  readonly controllers: number;
  /** How long the leader is paused (S: SIGSTOP, a long GC, a frozen VM). */
  readonly pauseMs: number;
  /** Σ fᵢ over the whole fleet: the fallback rates added up (0 for `deny` or `store`). */
  readonly fleetFallbackPerSecond: number;
  /** One agent's fallback rate f (what a refused agent admits instead of a lease). */
  readonly agentFallbackPerSecond: number;
}

/** What one failure costs, in the terms the real-process tests measure. */
export interface FailureBound {
  /** From the failure until every agent holds a lease again, at most (ms). */
  readonly backOnLeasesMs: number;
  /** How long agents run on their fallback, at most (ms). */
  readonly fallbackMs: number;
  /** Units admitted above the budget over the whole failure, at most. */
  readonly extraUnits: number;
  /** The highest ratio of admitted to C·R in any window of R. */
  readonly peakRatio: number;
}

/** The bound of each failure the quota leases are built to survive (docs/quota-leases.md). */
export interface LeaseFailureBounds {
  /** From the kill until the successor leads: the key runs out (E), then a campaign tick. */
  readonly takeoverMs: number;
  readonly leaderKilled: FailureBound;
  readonly leaderPaused: FailureBound;
  readonly redisLost: FailureBound;
  /** A refused agent holds no lease: its fallback, per second, for as long as it is refused. */
  readonly agentRefused: { readonly extraUnitsPerSecond: number; readonly peakRatio: number };
}

/** The election TTL a controller takes by default: L / 3, at least 300 ms. */
export function defaultElectionTtlMs(leaseTtlMs: number): number {
  return Math.max(300, Math.floor(leaseTtlMs / 3));
}

/** The election's campaign and renewal period: a third of E (as `controller-process.ts`). */
export function campaignTickMs(electionTtlMs: number): number {
  return Math.max(50, Math.floor(electionTtlMs / 3));
}

/**
 * How long an agent's stream may stay silent before it looks for another leader: R + δ
 * (δ = R / 2). A leader sends each subscribed bucket an assignment every R; a stream
 * silent for longer is on a leader that is stopped (SIGSTOP, a frozen VM: its socket
 * stays open, so the stream never fails) or that skipped a round. The agent keeps its
 * stream and its lease, and tries the other controllers beside it.
 */
export function silenceTimeoutMs(refreshMs: number): number {
  return refreshMs + refreshMs / 2;
}

/**
 * The cost of each failure (see docs/quota-leases.md, "What each failure costs"):
 *
 * - Leader killed. Its key runs out at most E after the kill and a follower campaigns
 *   every E/3, so the successor leads within E + E/3, having loaded every lease saved
 *   before it was sent. Each agent's last lease came at most R before the kill and holds
 *   L, so it lasts L − R into the failover; the agent finds the successor within K
 *   reconnects of it leading, and its lease arrives within δ/2 (the delivery the ledger's
 *   margin leaves once a save took its half). Only the time beyond L − R runs on the
 *   fallback. A follower campaigns again the moment the key runs out (its PTTL), so the
 *   tick E/3 is slack for a busy machine's timers.
 * - Leader paused for S. Its agents' streams stay open and nothing answers. An agent
 *   whose stream has been silent for Q = R + δ (`silenceTimeoutMs`; its last assignment
 *   came at most then after the pause began) tries the other controllers beside it, and
 *   moves to the first that leads: the successor, within E + E/3, which renews the
 *   lease its predecessor saved. A leader that wakes first (S < Q) refuses its streams
 *   before it acts, as it sees by its own clock that its term may have lapsed (it hands
 *   out nothing under the lost term). So the fleet is back within max(min(S, Q), E + E/3)
 *   + K reconnects + δ/2 (the delivery the ledger's margin leaves once a save took its
 *   half); beyond L − R, on the fallback.
 * - Redis lost or emptied. The new term's ledger is empty while the old term's leases
 *   live, at most L + δ (δ = R / 2): old and new leases may together reach 2·C in a
 *   window, and at most C·(L + δ) units over. The leader's renewal fails within E/3, the
 *   next campaign within E/3 more.
 * - An agent refused (duplicate name, not authenticated, over a cap): it holds no lease
 *   and admits its own fallback, f per second, for as long as it is refused.
 */
export function leaseFailureBounds(i: LeaseFailureInput): LeaseFailureBounds {
  const tick = campaignTickMs(i.electionTtlMs);
  const takeoverMs = i.electionTtlMs + tick;
  const find = i.controllers * i.reconnectMs;
  const held = Math.max(0, i.leaseTtlMs - i.refreshMs);
  const fleet = (backOnLeasesMs: number): FailureBound => {
    const fallbackMs = Math.max(0, backOnLeasesMs - held);
    return {
      backOnLeasesMs,
      fallbackMs,
      extraUnits: (i.fleetFallbackPerSecond * fallbackMs) / 1000,
      peakRatio: fallbackMs > 0 ? 1 + i.fleetFallbackPerSecond / i.budgetPerSecond : 1,
    };
  };
  const oldLeasesMs = i.leaseTtlMs + i.refreshMs / 2;
  return {
    takeoverMs,
    leaderKilled: fleet(takeoverMs + find + i.refreshMs / 4),
    leaderPaused: fleet(
      Math.max(Math.min(i.pauseMs, silenceTimeoutMs(i.refreshMs)), takeoverMs) +
        find +
        i.refreshMs / 4,
    ),
    redisLost: {
      backOnLeasesMs: 2 * tick + find,
      fallbackMs: 0,
      extraUnits: (i.budgetPerSecond * oldLeasesMs) / 1000,
      peakRatio: 2,
    },
    agentRefused: {
      extraUnitsPerSecond: i.agentFallbackPerSecond,
      peakRatio: 1 + i.agentFallbackPerSecond / i.budgetPerSecond,
    },
  };
}

/** {@link leaseFailureBounds} as titled sections of lines, for `sluice explain`. */
export function leaseFailureSections(i: LeaseFailureInput): readonly {
  readonly title: string;
  readonly lines: readonly PartitionBoundLine[];
}[] {
  const b = leaseFailureBounds(i);
  const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 2 });
  const s = (ms: number) => `${n(ms / 1000)}s`;
  const pct = (r: number) => `${n(r * 100)}% of the budget`;
  const E = s(i.electionTtlMs);
  const K = `${i.controllers} × ${s(i.reconnectMs)}`;
  const L_R = `L − R = ${s(i.leaseTtlMs)} − ${s(i.refreshMs)}`;
  const fleetLines = (f: FailureBound, back: string): PartitionBoundLine[] => [
    { label: 'fleet back on leases within', value: s(f.backOnLeasesMs), note: back },
    {
      label: 'fallback runs, at most',
      value: s(f.fallbackMs),
      note: `beyond what the last lease holds, ${L_R}`,
    },
    {
      label: 'units over the budget, at most',
      value: n(f.extraUnits),
      note: `the fleet's fallback, ${n(i.fleetFallbackPerSecond)}/s, for that long`,
    },
    {
      label: 'any window of R, at most',
      value: pct(f.peakRatio),
      note:
        f.fallbackMs > 0
          ? `1 + Σ fallback / budget (${n(i.budgetPerSecond)}/s)`
          : 'the successor counts every lease saved before it was sent',
    },
  ];
  return [
    {
      title: `lease, leader killed (election TTL ${E})`,
      lines: [
        {
          label: 'successor leads within',
          value: s(b.takeoverMs),
          note: `E + E/3: the key runs out, then a campaign tick`,
        },
        ...fleetLines(b.leaderKilled, `that + K reconnects (${K}) + δ/2 (delivery)`),
      ],
    },
    {
      title: `lease, leader paused for ${s(i.pauseMs)}`,
      lines: [
        {
          label: 'leases under the lost term',
          value: '0',
          note: 'awake, it sees by its own clock that its term may have lapsed, and refuses first',
        },
        ...fleetLines(
          b.leaderPaused,
          `max(min(S, R + δ), E + E/3) + K reconnects (${K}) + δ/2: a silent stream makes the agent try the others`,
        ),
      ],
    },
    {
      title: "lease, controllers' Redis lost or emptied",
      lines: [
        {
          label: 'fleet back on leases within',
          value: s(b.redisLost.backOnLeasesMs),
          note: `of Redis answering: a renewal fails, a campaign, K reconnects (2 × ${s(campaignTickMs(i.electionTtlMs))} + ${K})`,
        },
        {
          label: 'old leases outside the ledger, at most',
          value: s(i.leaseTtlMs + i.refreshMs / 2),
          note: 'L + δ: the new term starts from an empty ledger',
        },
        {
          label: 'units over the budget, at most',
          value: n(b.redisLost.extraUnits),
          note: 'the old leases, C, for that long',
        },
        {
          label: 'any window of R, at most',
          value: pct(b.redisLost.peakRatio),
          note: 'old leases and new ones, each at most the budget',
        },
      ],
    },
    {
      title: 'lease, an agent refused (duplicate name, not authenticated, over a cap)',
      lines: [
        {
          label: 'units over the budget per second',
          value: n(i.agentFallbackPerSecond),
          note: 'its own fallback, for as long as it is refused; 0 with deny',
        },
        {
          label: 'any window of R, at most',
          value: pct(b.agentRefused.peakRatio),
          note: `1 + fallback / budget (${n(i.budgetPerSecond)}/s), per refused agent`,
        },
      ],
    },
  ];
}
