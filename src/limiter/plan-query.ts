import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import type { DescriptorValues } from '../stores/key.js';
import type { Store } from '../stores/store.js';
import { validateCost } from './check-input.js';
import { planOf, release, takeItem, type PolicyPlan, type PreparedItem } from './policy-plan.js';
import type { Stage } from './stage.js';

/**
 * The check input of a rule set that matches requests itself (the envoy rules): the
 * limits a request was matched to, each a {@link PlanSpec}, with its bucket's descriptor
 * values and cost. `Limiter.check` resolves it like a descriptor, into the same plans and
 * items, under the same pipeline.
 */

/**
 * One limit a rule set compiles to, stable per rule and counting mode (the limiter
 * compiles each spec object into its plan once, and keeps it while the spec lives).
 */
export interface PlanSpec {
  /** A validated policy (as `parsePolicies` makes); its name is the one in storage keys. */
  readonly policy: Policy;
  /** The name decisions, metrics and stages know it by (`PolicyPlan.name`). */
  readonly name: string;
  /** Counted on its own, not all-or-nothing (`PolicyPlan.independent`). */
  readonly independent: boolean;
}

/**
 * What a check of matched limits asks for, in order. A cost above a limit's capacity is
 * a decision (OVER_LIMIT, never fits), not an error: the request's hits are not the
 * caller's choice. The specs of one query share a counting mode.
 */
export class PlanQuery {
  readonly specs: PlanSpec[] = [];
  readonly values: DescriptorValues[] = [];
  readonly costs: number[] = [];

  /** Adds a limit: its spec, the values its bucket key is built from, and its cost. */
  add(spec: PlanSpec, values: DescriptorValues, cost: number): this {
    this.specs.push(spec);
    this.values.push(values);
    this.costs.push(cost);
    return this;
  }

  get size(): number {
    return this.specs.length;
  }
}

/** The plans of the specs a limiter has been asked, compiled against its store and stages. */
export class QueryPlans {
  readonly #store: Store;
  readonly #stages: readonly Stage[];
  readonly #plans = new WeakMap<PlanSpec, PolicyPlan>();

  constructor(store: Store, stages: readonly Stage[]) {
    this.#store = store;
    this.#stages = stages;
  }

  /**
   * The items of `query`, held for the check (`cost`: the check's override). Throws a
   * `PolicyError` for an invalid cost, a query with specs of both counting modes, or an
   * all-or-nothing spec whose policy charges denials (which such a batch cannot undo).
   */
  prepare(query: PlanQuery, cost: number | undefined): PreparedItem[] {
    if (cost !== undefined) validateCost(cost);
    const { specs, values, costs } = query;
    const items: PreparedItem[] = [];
    if (specs.length === 0) return items;
    const independent = this.#planOf(specs[0]!).independent;
    try {
      for (let i = 0; i < specs.length; i++) {
        const plan = this.#planOf(specs[i]!);
        if (plan.independent !== independent) {
          throw new PolicyError(
            'SLUICE_ERR_POLICY_UNSUPPORTED',
            `a check mixes limits counted on their own and all-or-nothing ones ("${specs[0]!.name}", "${plan.name}")`,
          );
        }
        const c = cost ?? costs[i]!;
        validateCost(c);
        items.push(takeItem(plan).prepare(c, undefined, values[i]!, undefined));
      }
    } catch (error) {
      release(items);
      throw error;
    }
    return items;
  }

  #planOf(spec: PlanSpec): PolicyPlan {
    let plan = this.#plans.get(spec);
    if (plan === undefined) {
      const { policy, name, independent } = spec;
      plan = planOf(policy, this.#store, this.#stages, name, independent);
      if (!independent && plan.algorithm.chargesDenied?.(policy.params) === true) {
        throw new PolicyError(
          'SLUICE_ERR_POLICY_UNSUPPORTED',
          `policy "${name}" charges denied requests, which an all-or-nothing decision cannot undo; count it independently`,
        );
      }
      this.#plans.set(spec, plan);
    }
    return plan;
  }
}
