import { partitionBound, type PartitionBound } from '../bounds.js';
import { runGlobalOwner, runStaticDivision } from './baselines.js';
import { demandSeries, runLeaseFleet } from './lease-fleet.js';
import { buildScenario, type Scenario, type SimulationOptions } from './scenario.js';

/** How one strategy did, as ratios of admitted units to the budget C·R per window. */
export interface StrategyFigures {
  /** Admitted ÷ budget over the windows where total demand exceeded the budget. */
  readonly utilization: number;
  /** The highest admitted ÷ budget of any window. */
  readonly peakOverBudget: number;
  /** The same, leaving out the partition's windows. */
  readonly peakOverBudgetOutsidePartition: number;
}

/** The JSON `sluice simulate leases --json` prints. */
export interface SimulationReport extends StrategyFigures {
  readonly regions: number;
  readonly agents: number;
  readonly seconds: number;
  readonly seed: number;
  readonly budgetPerSecond: number;
  readonly refreshMs: number;
  readonly leaseTtlMs: number;
  /** Share of the windows in which demand exceeded the budget. */
  readonly demandOverBudgetShare: number;
  /** The partition bound that applies (src/quota/bounds.ts). */
  readonly partitionBound: PartitionBound;
  readonly partition: {
    readonly region: number;
    readonly fromMs: number;
    readonly toMs: number;
    readonly agents: number;
    readonly peakOverBudget: number;
    readonly extraUnits: number;
    readonly withinBound: boolean;
  };
  readonly flashCrowd: {
    readonly region: number;
    readonly fromMs: number;
    readonly toMs: number;
    readonly factor: number;
  };
  readonly failover: {
    readonly fromMs: number;
    readonly toMs: number;
    readonly tokens: readonly [number, number];
    readonly staleLeasesRefused: number;
  };
  /** The lease fleet's remote calls: reports per second (no call per request). */
  readonly reportsPerSecond: number;
  readonly baselines: {
    readonly staticDivision: StrategyFigures;
    readonly globalOwner: StrategyFigures & { readonly remoteCallsPerSecond: number };
  };
}

/** Per-window ratios of every strategy and of demand, for the chart. */
export interface SimulationSeries {
  readonly demand: Float64Array;
  readonly leases: Float64Array;
  readonly staticDivision: Float64Array;
  readonly globalOwner: Float64Array;
}

/** Runs the scenario for every strategy; deterministic for given options. */
export function simulateLeases(o: SimulationOptions): {
  report: SimulationReport;
  series: SimulationSeries;
  scenario: Scenario;
} {
  const s = buildScenario(o);
  const demand = demandSeries(s);
  const perWindow = (s.budget * s.refreshMs) / 1000;
  const demandRatio = new Float64Array(s.ticks);
  for (let k = 0; k < s.ticks; k++) {
    let sum = 0;
    for (const d of demand[k]!) sum += d;
    demandRatio[k] = (sum * s.refreshMs) / 1000 / perWindow;
  }
  const leases = runLeaseFleet(s, demand);
  const fixed = runStaticDivision(s, demand);
  const owner = runGlobalOwner(s, demand);
  const ratio = (a: Float64Array) => a.map((x) => x / perWindow);
  const series: SimulationSeries = {
    demand: demandRatio,
    leases: ratio(leases.admitted),
    staticDivision: ratio(fixed.admitted),
    globalOwner: ratio(owner.admitted),
  };
  const inPartition = (k: number) => k >= s.partition.from && k < s.partition.to;
  const figures = (r: Float64Array): StrategyFigures => {
    let used = 0;
    let over = 0;
    let peak = 0;
    let peakOutside = 0;
    for (let k = 0; k < s.ticks; k++) {
      if (demandRatio[k]! > 1) {
        used += r[k]!;
        over++;
      }
      peak = Math.max(peak, r[k]!);
      if (!inPartition(k)) peakOutside = Math.max(peakOutside, r[k]!);
    }
    return {
      utilization: over === 0 ? 1 : used / over,
      peakOverBudget: peak,
      peakOverBudgetOutsidePartition: peakOutside,
    };
  };
  const bound = partitionBound({
    budgetPerSecond: s.budget,
    refreshMs: s.refreshMs,
    leaseTtlMs: s.leaseTtlMs,
    partitionMs: (s.partition.to - s.partition.from) * s.refreshMs,
    fallbackRatePerSecond: leases.partitionedAgents * s.fallbackRate,
  });
  let partitionPeak = 0;
  let extra = 0;
  for (let k = s.partition.from; k < s.partition.to; k++) {
    partitionPeak = Math.max(partitionPeak, series.leases[k]!);
    extra += Math.max(0, leases.admitted[k]! - perWindow);
  }
  let overCount = 0;
  for (const d of demandRatio) if (d > 1) overCount++;
  const ms = (k: number) => k * s.refreshMs;
  const report: SimulationReport = {
    regions: s.regions,
    agents: s.agents,
    seconds: s.seconds,
    seed: s.seed,
    budgetPerSecond: s.budget,
    refreshMs: s.refreshMs,
    leaseTtlMs: s.leaseTtlMs,
    ...figures(series.leases),
    demandOverBudgetShare: overCount / s.ticks,
    partitionBound: bound,
    partition: {
      region: s.partition.region,
      fromMs: ms(s.partition.from),
      toMs: ms(s.partition.to),
      agents: leases.partitionedAgents,
      peakOverBudget: partitionPeak,
      extraUnits: extra,
      withinBound: partitionPeak <= bound.peakRatio + 1e-9 && extra <= bound.extraUnits + 1e-6,
    },
    flashCrowd: {
      region: s.flash.region,
      fromMs: ms(s.flash.from),
      toMs: ms(s.flash.to),
      factor: s.flash.factor,
    },
    failover: {
      fromMs: ms(s.failover.from),
      toMs: ms(s.failover.to),
      tokens: leases.tokens,
      staleLeasesRefused: leases.staleLeasesRefused,
    },
    reportsPerSecond: leases.reportsPerSecond,
    baselines: {
      staticDivision: figures(series.staticDivision),
      globalOwner: {
        ...figures(series.globalOwner),
        remoteCallsPerSecond: owner.remoteCallsPerSecond,
      },
    },
  };
  return { report, series, scenario: s };
}
