import { QuotaAgent } from '../agent.js';
import { QuotaController, type ControllerState } from '../controller.js';
import type { Lease } from '../lease.js';
import { demandAt, type Scenario } from './scenario.js';

/** Per-tick series of one strategy: units admitted in each window of R. */
export interface StrategySeries {
  readonly admitted: Float64Array;
}

/** What the lease fleet did besides admitting. */
export interface LeaseFleetRun extends StrategySeries {
  /** Sum of the lease rates in force at each tick (units/s). */
  readonly leased: Float64Array;
  /** Leases refused by agents because a newer leader's token had been seen. */
  readonly staleLeasesRefused: number;
  /** The fencing tokens of the first leader and its successor. */
  readonly tokens: readonly [number, number];
  /** Agents cut off by the partition (present when it began). */
  readonly partitionedAgents: number;
  /** Reports sent to the controller per second, on average (the fleet's remote calls). */
  readonly reportsPerSecond: number;
}

const BUCKET = 'global';

/**
 * Runs the real controller and agents on the scenario's virtual clock. Each tick, in
 * order: present agents report (a joining agent's first report gets it a lease at
 * once), the leader runs a round and its leases are delivered, then every agent admits
 * its demand for the window from its lease or fallback. The partitioned region's
 * reports and leases are lost; while no leader is up, all are. When the successor takes
 * over, it loads the state its predecessor saved with its last round; that round's
 * leases, delayed in the network, arrive after the successor's and agents must refuse
 * them (older fencing token).
 */
export function runLeaseFleet(s: Scenario, demand: readonly Float64Array[]): LeaseFleetRun {
  const options = {
    budgets: [{ bucket: BUCKET, ratePerSecond: s.budget }],
    refreshMs: s.refreshMs,
    leaseTtlMs: s.leaseTtlMs,
  };
  const firstToken = 1;
  let leader: QuotaController | undefined = new QuotaController(options, firstToken);
  let stale: readonly Lease[] = [];
  let saved: ControllerState = leader.state();
  const agents = Array.from(
    { length: s.agents },
    (_, i) =>
      new QuotaAgent(
        {
          agent: String(i),
          bucket: BUCKET,
          fallback: { kind: 'static', rate: s.fallbackRate },
          initial: { kind: 'deny' },
          windowMs: s.refreshMs,
          priority: s.priority[i]!,
          weight: s.weight[i]!,
        },
        0,
      ),
  );
  const admitted = new Float64Array(s.ticks);
  const leased = new Float64Array(s.ticks);
  let refused = 0;
  let reports = 0;
  let partitionedAgents = 0;
  const deliver = (lease: Lease, nowMs: number, cut: (i: number) => boolean) => {
    const i = Number(lease.agent);
    if (!cut(i)) agents[i]!.apply(lease, nowMs);
  };
  for (let k = 0; k < s.ticks; k++) {
    const nowMs = k * s.refreshMs;
    const partitioned = k >= s.partition.from && k < s.partition.to;
    const cut = (i: number) => partitioned && s.region[i] === s.partition.region;
    if (k === s.partition.from) {
      for (let i = 0; i < s.agents; i++) if (cut(i) && demand[k]![i]! > 0) partitionedAgents++;
    }
    if (k === s.failover.from && leader !== undefined) {
      // The leader's last round: saved first, as the process does, but its leases are
      // delayed in the network and arrive only after its successor's.
      stale = leader.round(nowMs).leases;
      saved = leader.state();
      leader = undefined;
    }
    if (k === s.failover.to) leader = new QuotaController(options, firstToken + 1, saved);
    const d = demand[k]!;
    for (let i = 0; i < s.agents; i++) {
      if (k < s.joinTick[i]! || k >= s.leaveTick[i]!) continue;
      const report = agents[i]!.report(nowMs);
      if (leader === undefined || cut(i)) continue;
      reports++;
      const first = leader.report(report, nowMs);
      if (first !== undefined) agents[i]!.apply(first, nowMs);
    }
    if (leader !== undefined) {
      for (const lease of leader.round(nowMs).leases) deliver(lease, nowMs, cut);
      saved = leader.state();
      for (const lease of stale) {
        const i = Number(lease.agent);
        if (!cut(i) && agents[i]!.apply(lease, nowMs) === 'stale-leader') refused++;
      }
      stale = [];
    }
    let sum = 0;
    let rates = 0;
    for (let i = 0; i < s.agents; i++) {
      const a = agents[i]!;
      rates += a.lease(nowMs)?.rate ?? 0;
      if (d[i]! > 0) sum += a.admit(nowMs, (d[i]! * s.refreshMs) / 1000) ?? 0;
    }
    admitted[k] = sum;
    leased[k] = rates;
  }
  return {
    admitted,
    leased,
    staleLeasesRefused: refused,
    tokens: [firstToken, firstToken + 1],
    partitionedAgents,
    reportsPerSecond: reports / (s.ticks * (s.refreshMs / 1000)),
  };
}

/** Every tick's demand vector, computed once and shared by every strategy. */
export function demandSeries(s: Scenario): Float64Array[] {
  const out: Float64Array[] = [];
  for (let k = 0; k < s.ticks; k++) {
    const d = new Float64Array(s.agents);
    demandAt(s, k, d);
    out.push(d);
  }
  return out;
}
