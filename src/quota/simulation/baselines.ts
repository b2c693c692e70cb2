import { present, type Scenario } from './scenario.js';
import type { StrategySeries } from './lease-fleet.js';

/**
 * Static division on the same demand: every agent holds C / agents for the whole run,
 * whatever its demand. No controller, so neither the partition nor the failover changes
 * anything; capacity idle at one agent cannot serve another.
 */
export function runStaticDivision(s: Scenario, demand: readonly Float64Array[]): StrategySeries {
  const perWindow = ((s.budget / s.agents) * s.refreshMs) / 1000;
  const admitted = new Float64Array(s.ticks);
  for (let k = 0; k < s.ticks; k++) {
    let sum = 0;
    for (let i = 0; i < s.agents; i++)
      sum += Math.min((demand[k]![i]! * s.refreshMs) / 1000, perWindow);
    admitted[k] = sum;
  }
  return { admitted };
}

/** One global owner's series, with what it costs. */
export interface GlobalOwnerRun extends StrategySeries {
  /** Remote calls per second on average: one per request unit that asks the owner. */
  readonly remoteCallsPerSecond: number;
}

/**
 * One global owner on the same demand: every request asks one counter of C·R per window
 * (exact, first come first served). The partitioned region cannot reach it and is
 * denied (fail-closed); while the owner fails over, every request is.
 */
export function runGlobalOwner(s: Scenario, demand: readonly Float64Array[]): GlobalOwnerRun {
  const capacity = (s.budget * s.refreshMs) / 1000;
  const admitted = new Float64Array(s.ticks);
  let calls = 0;
  for (let k = 0; k < s.ticks; k++) {
    if (k >= s.failover.from && k < s.failover.to) continue;
    const partitioned = k >= s.partition.from && k < s.partition.to;
    let asked = 0;
    for (let i = 0; i < s.agents; i++) {
      if (!present(s, i, k) || (partitioned && s.region[i] === s.partition.region)) continue;
      asked += (demand[k]![i]! * s.refreshMs) / 1000;
    }
    calls += asked;
    admitted[k] = Math.min(asked, capacity);
  }
  return { admitted, remoteCallsPerSecond: calls / (s.ticks * (s.refreshMs / 1000)) };
}
