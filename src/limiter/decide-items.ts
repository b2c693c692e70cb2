import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { bucketKey } from '../stores/key.js';
import type { Store } from '../stores/store.js';
import { validateCost } from './check-input.js';
import type { CheckItem } from './limiter-options.js';
import type { PolicyPlans } from './plan.js';
import { planOf, PreparedItem, release, type PolicyPlan } from './policy-plan.js';
import type { Stage } from './stage.js';

/**
 * `Limiter.decideAt`'s resolve: (policy, descriptor, cost) items the caller matched
 * itself become prepared items, each with its policy's plan (the set's own, else one
 * compiled on first sight and kept per policy object).
 */
export class DecidedItems {
  readonly #store: Store;
  readonly #stages: readonly Stage[];
  /** Plans of policies outside the set in force, by policy object. */
  readonly #loose = new WeakMap<Policy, PolicyPlan>();

  constructor(store: Store, stages: readonly Stage[]) {
    this.#store = store;
    this.#stages = stages;
  }

  /**
   * The prepared items of `items`, held for the check. Throws a `PolicyError` for an
   * invalid cost, or for a policy that charges denials in an all-or-nothing decision.
   */
  prepare(items: readonly CheckItem[], plans: PolicyPlans, independent: boolean): PreparedItem[] {
    const prepared: PreparedItem[] = [];
    try {
      for (const { policy, descriptor, cost } of items) {
        validateCost(cost);
        const plan = this.#planOf(policy, plans);
        if (!independent && plan.algorithm.chargesDenied?.(policy.params) === true) {
          throw new PolicyError(
            'SLUICE_ERR_POLICY_UNSUPPORTED',
            `policy "${policy.name}" charges denied requests, which an all-or-nothing decision cannot undo; decide it with independent: true`,
          );
        }
        // Not the spare: one policy may stand in several items of a batch.
        prepared.push(
          new PreparedItem(plan)
            .hold()
            .prepare(cost, bucketKey(policy, descriptor), undefined, undefined),
        );
      }
    } catch (error) {
      release(prepared);
      throw error;
    }
    return prepared;
  }

  #planOf(policy: Policy, plans: PolicyPlans): PolicyPlan {
    const own = plans.byName(policy.name);
    if (own?.policy === policy) return own;
    let plan = this.#loose.get(policy);
    if (plan === undefined) {
      plan = planOf(policy, this.#store, this.#stages);
      this.#loose.set(policy, plan);
    }
    return plan;
  }
}
