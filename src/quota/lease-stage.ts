import type { AlgorithmDecision } from '../core/decision.js';
import type { Policy } from '../core/policy.js';
import type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StageVerdict,
} from '../limiter/stage.js';
import type { StageRecorder } from '../metrics/stage-metrics.js';
import type { QuotaAgent } from './agent.js';

/** Options of {@link LeaseStage}. */
export interface LeaseStageOptions {
  /** Names of the policies whose checks go through a lease. */
  readonly policies: readonly string[];
  /**
   * The agent that holds the lease for an item (its policy and bucket key), or
   * `undefined` to pass the item on to the store.
   */
  readonly agentFor: (item: StageItem) => QuotaAgent | undefined;
  /**
   * Told, as stage `lease`, each window's allowance of a lease a check used (`granted`,
   * once per agent and window, plus what a raise within the window adds) and the units of
   * admitted checks (`spent`); utilization is spent / granted. @default none
   */
  readonly metrics?: StageRecorder;
}

/**
 * The quota lease as a stage of the check pipeline (docs/design.md, "Quota leases"; path
 * `lease`): the item's agent decides it in process, from its lease or, once that has
 * expired, its fallback, with no remote call. Under the `store` fallback the item passes
 * on to the store, and the store's decision is counted in the agent's next report. When another policy denies the check, `settle` gives the units back
 * to the agent, so its report counts only what was admitted.
 */
export class LeaseStage implements Stage {
  readonly name = 'lease';
  readonly #policies: ReadonlySet<string>;
  readonly #agentFor: (item: StageItem) => QuotaAgent | undefined;
  readonly #metrics: StageRecorder | undefined;
  /**
   * By agent, the last window whose allowance was counted granted (its end) and how much
   * of it: a raise within the window grants the difference too.
   */
  readonly #granted = new WeakMap<QuotaAgent, { end: number; allowance: number }>();

  constructor(options: LeaseStageOptions) {
    this.#policies = new Set(options.policies);
    this.#agentFor = options.agentFor;
    this.#metrics = options.metrics;
  }

  /** By the name the check knows the policy by (an envoy rule's public name). */
  appliesTo(policy: Policy, name: string = policy.name): boolean {
    return this.#policies.has(name);
  }

  enter(item: StageItem, ctx: StageContext): StageVerdict {
    const agent = this.#agentFor(item);
    if (agent === undefined) return undefined;
    const result = agent.take(ctx.nowMs, item.cost);
    if (result === 'store') return undefined;
    const w = agent.window(ctx.nowMs);
    const limit = w.allowance ?? 0;
    const metrics = this.#metrics;
    if (metrics !== undefined && agent.mode(ctx.nowMs) === 'lease') {
      // A fallback's allowance is local, not granted: only a lease's windows count.
      const end = ctx.nowMs + w.resetAfterMs;
      const counted = this.#granted.get(agent);
      if (counted === undefined || counted.end !== end) {
        this.#granted.set(agent, { end, allowance: limit });
        metrics.granted('lease', item.name ?? item.policy.name, limit);
      } else if (limit > counted.allowance) {
        metrics.granted('lease', item.name ?? item.policy.name, limit - counted.allowance);
        counted.allowance = limit;
      }
    }
    const decision: AlgorithmDecision = {
      status: result === 'allowed' ? 'OK' : 'OVER_LIMIT',
      allowed: result === 'allowed',
      limit,
      remaining: Math.max(0, limit - w.used),
      // A denied cost fits no sooner than the next window (the lease, or its successor).
      retryAfterMs: result === 'allowed' ? 0 : w.resetAfterMs,
      resetAfterMs: w.resetAfterMs,
    };
    return { kind: 'answer', decision, path: 'lease' };
  }

  settle(item: StageItem, verdict: StageVerdict, outcome: StageOutcome, ctx: StageContext): void {
    if (verdict === undefined) {
      this.#countStore(item, outcome, ctx);
      return;
    }
    if (verdict.kind !== 'answer' || !verdict.decision.allowed) return;
    if (!outcome.admitted) {
      this.#agentFor(item)?.refund(ctx.nowMs, item.cost);
      return;
    }
    // Spent from the lease only (a fallback's units were never granted); ctx.nowMs is the
    // time `enter` answered at, so the mode is the one it answered in.
    const metrics = this.#metrics;
    if (metrics !== undefined && this.#agentFor(item)?.mode(ctx.nowMs) === 'lease') {
      metrics.spent('lease', item.name ?? item.policy.name, item.cost);
    }
  }

  /**
   * Under the `store` fallback the store decided the item; the agent still reports it,
   * so the controller's view of this agent's demand stays true while it is on the
   * fallback. Admitted units are use, the item's own denial is unmet demand; a check
   * denied by another policy consumed nothing of this one and is neither.
   */
  #countStore(item: StageItem, outcome: StageOutcome, ctx: StageContext): void {
    const agent = this.#agentFor(item);
    // ctx.nowMs is the time `enter` passed the item on at: the same rule is in force.
    if (agent === undefined || agent.window(ctx.nowMs).allowance !== undefined) return;
    if (outcome.admitted) agent.count(item.cost, 0);
    else if (!outcome.decision.allowed) agent.count(0, item.cost);
  }
}
