import { PolicyError, type PolicyIssue } from '../../core/errors.js';
import { SeededRandom } from './random.js';

/** What `sluice simulate leases` is asked for. */
export interface SimulationOptions {
  readonly regions: number;
  readonly agents: number;
  readonly seconds: number;
  readonly seed: number;
}

/** An interval of ticks, [from, to). */
export interface TickRange {
  readonly from: number;
  readonly to: number;
}

/**
 * The demand and events of one simulation, fixed by its options (seed included). Time
 * moves in ticks of one refresh period; tick k is the window [k·R, (k+1)·R).
 *
 * - Budget C = 100 units/s per agent.
 * - Agent i lives in region ⌊i·regions/agents⌋ and has a base size drawn log-normally
 *   (σ = 0.8), a weight (2 for one agent in ten, else 1) and a priority (1 for one in
 *   twenty, else 0).
 * - Total demand follows a level g(t) = 1.3 + 0.2·sin(4πt/S) times C, falling to about
 *   0.8·C over the last fifth of the run, so a part of the run has demand below budget.
 * - A diurnal wave runs across regions: region r is scaled by 1 + 0.6·sin(2π(2t/S + r/regions)).
 * - A flash crowd multiplies one region's demand by 6 for a tenth of the run from 0.25·S.
 * - Another region is cut off from the controller for 5 refresh periods from 0.5·S.
 * - The leader dies at 0.65·S; its successor takes over 2 refresh periods later.
 * - One agent in twenty joins during the first half; another one in twenty leaves during
 *   the second half.
 */
export interface Scenario extends SimulationOptions {
  readonly refreshMs: number;
  readonly leaseTtlMs: number;
  readonly ticks: number;
  readonly budget: number;
  readonly region: Int32Array;
  readonly base: Float64Array;
  readonly weight: Float64Array;
  readonly priority: Int32Array;
  /** First tick the agent is present. */
  readonly joinTick: Int32Array;
  /** First tick the agent is gone (ticks when it never leaves). */
  readonly leaveTick: Int32Array;
  readonly flash: TickRange & { readonly region: number; readonly factor: number };
  readonly partition: TickRange & { readonly region: number };
  /** Ticks with no leader. */
  readonly failover: TickRange;
  /** The fallback rate of every agent: an equal static share, C / agents. */
  readonly fallbackRate: number;
}

/**
 * The largest run the simulation takes. Memory and time grow with agents × seconds (the
 * demand series alone holds one number per agent and refresh period, and every period
 * runs every agent): the documented full-scale run is 10,000 agents for 600 s (6e6
 * agent-seconds, about 30 s and 0.5 GB on the shared 2-core machine), so twice that is
 * allowed and no more.
 */
export const SIMULATION_LIMITS = Object.freeze({
  agents: 100_000,
  seconds: 86_400,
  agentSeconds: 12_000_000,
});

/** Builds the scenario; rejects options it cannot run, naming each. */
export function buildScenario(o: SimulationOptions): Scenario {
  const issues: PolicyIssue[] = [];
  const whole = (v: number, min: number, max: number, path: string) => {
    if (!Number.isSafeInteger(v) || v < min)
      issues.push({ path, message: `must be a whole number ≥ ${min}, got ${v}` });
    else if (v > max) issues.push({ path, message: `must be at most ${max}, got ${v}` });
  };
  const L = SIMULATION_LIMITS;
  whole(o.regions, 2, L.agents, 'regions');
  whole(o.agents, Math.max(2, o.regions), L.agents, 'agents');
  whole(o.seconds, 60, L.seconds, 'seconds');
  whole(o.seed, 0, Number.MAX_SAFE_INTEGER, 'seed');
  if (issues.length === 0 && o.agents * o.seconds > L.agentSeconds)
    issues.push({
      path: 'agents × seconds',
      message: `must be at most ${L.agentSeconds} (memory and time grow with both), got ${o.agents} × ${o.seconds} = ${o.agents * o.seconds}`,
    });
  if (issues.length > 0) {
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_CONFIG_INVALID',
      `invalid simulation: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { issues },
    );
  }
  const refreshMs = 1_000;
  const ticks = Math.round((o.seconds * 1_000) / refreshMs);
  const rnd = new SeededRandom(o.seed);
  const n = o.agents;
  const region = new Int32Array(n);
  const base = new Float64Array(n);
  const weight = new Float64Array(n);
  const priority = new Int32Array(n);
  const joinTick = new Int32Array(n);
  const leaveTick = new Int32Array(n).fill(ticks);
  for (let i = 0; i < n; i++) {
    region[i] = Math.floor((i * o.regions) / n);
    base[i] = Math.exp(0.8 * rnd.normal());
    weight[i] = rnd.next() < 0.1 ? 2 : 1;
    priority[i] = rnd.next() < 0.05 ? 1 : 0;
    const churn = rnd.next();
    if (churn < 0.05) joinTick[i] = 1 + rnd.below(Math.floor(ticks / 2));
    else if (churn < 0.1) leaveTick[i] = Math.floor(ticks / 2) + rnd.below(Math.floor(ticks / 2));
  }
  const flashRegion = rnd.below(o.regions);
  const partitionRegion = (flashRegion + 1 + rnd.below(o.regions - 1)) % o.regions;
  const at = (f: number) => Math.floor(ticks * f);
  return {
    ...o,
    refreshMs,
    leaseTtlMs: 3 * refreshMs,
    ticks,
    budget: 100 * n,
    region,
    base,
    weight,
    priority,
    joinTick,
    leaveTick,
    flash: { region: flashRegion, from: at(0.25), to: at(0.25) + Math.max(10, at(0.1)), factor: 6 },
    partition: { region: partitionRegion, from: at(0.5), to: at(0.5) + 5 },
    failover: { from: at(0.65), to: at(0.65) + 2 },
    fallbackRate: 100,
  };
}

/** Whether agent `i` is present at tick `k`. */
export function present(s: Scenario, i: number, k: number): boolean {
  return k >= s.joinTick[i]! && k < s.leaveTick[i]!;
}

/** Fills `out` with every agent's demand (units/s) during tick `k`; 0 when absent. */
export function demandAt(s: Scenario, k: number, out: Float64Array): void {
  const t = k / s.ticks;
  const fall = Math.min(1, Math.max(0, (t - 0.8) / 0.1));
  const level = 1.3 + 0.2 * Math.sin(4 * Math.PI * t) - 0.6 * fall * fall * (3 - 2 * fall);
  let totalBase = 0;
  for (let i = 0; i < s.agents; i++) totalBase += s.base[i]!;
  const regional = new Float64Array(s.regions);
  for (let r = 0; r < s.regions; r++) {
    regional[r] = 1 + 0.6 * Math.sin(2 * Math.PI * (2 * t + r / s.regions));
    if (r === s.flash.region && k >= s.flash.from && k < s.flash.to) regional[r]! *= s.flash.factor;
  }
  const scale = (s.budget * level) / totalBase;
  for (let i = 0; i < s.agents; i++) {
    out[i] = present(s, i, k) ? scale * s.base[i]! * regional[s.region[i]!]! : 0;
  }
}
