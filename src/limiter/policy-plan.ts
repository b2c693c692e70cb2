import { algorithmOf } from '../algorithms/index.js';
import type { Algorithm } from '../algorithms/algorithm.js';
import type { AlgorithmDecision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { bucketKeyBuilder, scopeKeysOf, type DescriptorValues } from '../stores/key.js';
import type { KeySpace, Store, StoreRequest } from '../stores/store.js';
import type { Stage, StageItem, StagePath, StageVerdict } from './stage.js';

/**
 * A policy prepared for checks: compiled once per policy set against the limiter's store
 * and stages ({@link PolicyPlan}), and the item one check of it flows through the
 * pipeline as ({@link PreparedItem}).
 */

/** One policy, compiled against the limiter's store and stages. */
export interface PolicyPlan {
  readonly policy: Policy;
  /**
   * The name decisions, metrics and stages know the plan by: the policy's own for a
   * policy file; an envoy rule's public name for the (internally named) policy it
   * compiles to.
   */
  readonly name: string;
  /**
   * How a check of this plan is counted: `false`, all-or-nothing (a denial anywhere
   * charges nothing); `true`, each item on its own, as envoyproxy/ratelimit charges every
   * matched limit. The plans of one check agree (see `PlanQuery`).
   */
  readonly independent: boolean;
  readonly algorithm: Algorithm<unknown, unknown>;
  readonly capacity: number;
  readonly enforce: boolean;
  /** Match entries with a fixed value, checked per descriptor. */
  readonly fixed: readonly { readonly key: string; readonly value: string }[];
  /** The bucket key of a matching descriptor (`bucketKeyBuilder`). */
  readonly key: (d: DescriptorValues) => string;
  /**
   * For a policy with one identity key and no scope, on a store with key spaces: that
   * key, and the store's space of the policy's buckets (`Store.keySpace`). Both
   * `undefined` otherwise.
   */
  readonly valueKey: string | undefined;
  readonly space: KeySpace | undefined;
  /** The limiter's stages that apply to the policy, in order (usually none). */
  readonly stages: readonly Stage[];
  /** An item kept for reuse by one check at a time (see {@link takeItem}). */
  readonly spare: PreparedItem;
  /** `[spare]`: the item list of a check of this policy alone. */
  readonly alone: readonly PreparedItem[];
}

/**
 * Compiles one policy against the limiter's store and stages, under `name` (default: the
 * policy's) and counting mode (default: all-or-nothing).
 */
export function planOf(
  policy: Policy,
  store: Store | undefined,
  stages: readonly Stage[],
  name: string = policy.name,
  independent = false,
): PolicyPlan {
  const algorithm = algorithmOf(policy.algorithm);
  const single = policy.identity.length === 1 && scopeKeysOf(policy).length === 0;
  const space = single ? store?.keySpace?.(policy.name) : undefined;
  const plan = {
    policy,
    name,
    independent,
    algorithm,
    capacity: algorithm.capacity(policy.params),
    enforce: !policy.shadow,
    fixed: policy.match
      .filter((m) => m.value !== undefined)
      .map((m) => ({ key: m.key, value: m.value! })),
    key: bucketKeyBuilder(policy),
    valueKey: space === undefined ? undefined : policy.identity[0]!,
    space,
    stages: stages.filter((s) => s.appliesTo(policy, name)),
  } as unknown as { -readonly [K in keyof PolicyPlan]: PolicyPlan[K] };
  plan.spare = new PreparedItem(plan);
  plan.alone = [plan.spare];
  return plan;
}

/**
 * An item of `plan` for one check: its spare when no check in flight holds it, else a new
 * one. Give it back with {@link PreparedItem.release} once the check is decided.
 */
export function takeItem(plan: PolicyPlan): PreparedItem {
  const spare = plan.spare;
  if (spare.busy) return new PreparedItem(plan).hold();
  return spare.hold();
}

/**
 * One matched policy of a check, resolved once (policy plan, bucket key or key-space
 * value, cost): what the stages see ({@link StageItem}) and, unless a stage answers it,
 * the request the store runs ({@link StoreRequest}). Its key text is built only when read:
 * a store that finds the bucket in its key space never reads it.
 */
export class PreparedItem implements StageItem, StoreRequest {
  readonly plan: PolicyPlan;
  readonly policy: Policy;
  readonly name: string;
  readonly algorithm: Algorithm<unknown, unknown>;
  readonly params: unknown;
  readonly enforce: boolean;
  readonly capacity: number;
  cost = 0;
  space: KeySpace | undefined = undefined;
  value: string | undefined = undefined;
  #key: string | undefined = undefined;
  /** The descriptor values the key is built from, until it is. */
  #values: DescriptorValues | undefined = undefined;
  /** Holders: the check in flight, and an asynchronous store call that may still read it. */
  #holds = 0;
  /** Stages of `plan.stages` entered so far, and what each said (`verdicts[i]`). */
  entered = 0;
  verdicts: StageVerdict[] | undefined = undefined;
  /** A stage's answer, when one answered. */
  answer: AlgorithmDecision | undefined = undefined;
  answerPath: StagePath | undefined = undefined;
  /** The store's error, when its call failed and the policy's failure mode decided. */
  storeError: StoreError | undefined = undefined;

  constructor(plan: PolicyPlan) {
    this.plan = plan;
    this.policy = plan.policy;
    this.name = plan.name;
    this.algorithm = plan.algorithm;
    this.params = plan.policy.params;
    this.enforce = plan.enforce;
    this.capacity = plan.capacity;
  }

  /** Sets the item up for a check: its cost and either its key or the values to build it from. */
  prepare(
    cost: number,
    key: string | undefined,
    values: DescriptorValues | undefined,
    value: string | undefined,
  ): this {
    this.cost = cost;
    this.#key = key;
    this.#values = key === undefined ? values : undefined;
    const space = value === undefined ? undefined : this.plan.space;
    this.space = space;
    this.value = space === undefined ? undefined : value;
    this.entered = 0;
    this.answer = undefined;
    this.answerPath = undefined;
    this.storeError = undefined;
    return this;
  }

  /**
   * Built on first read. A getter on the class, so a spread of the item leaves it out
   * (see `StoreRequest`). (An own accessor per item was measured: it made an awaited
   * check cost about 1.7 times the CPU.)
   */
  get key(): string {
    return this.#keyText();
  }

  #keyText(): string {
    let key = this.#key;
    if (key === undefined) {
      key = this.#key = this.plan.key(this.#values!);
      this.#values = undefined;
    }
    return key;
  }

  /**
   * Builds the key now, before the check waits on anything: the caller may change its
   * descriptor object once the check has returned a promise.
   */
  fix(): void {
    if (this.#key === undefined) this.#keyText();
  }

  /** Notes what stage `plan.stages[entered]` said, and applies it. */
  take(verdict: StageVerdict): void {
    const i = this.entered++;
    (this.verdicts ??= [])[i] = verdict;
    if (verdict === undefined) return;
    if (verdict.kind === 'pass') this.cost = verdict.cost;
    else {
      this.answer = verdict.decision;
      this.answerPath = verdict.path;
    }
  }

  /** Whether a check or a store call holds the item (see {@link takeItem}). */
  get busy(): boolean {
    return this.#holds > 0;
  }

  /** One more holder. */
  hold(): this {
    this.#holds += 1;
    return this;
  }

  /**
   * One holder fewer; with none left, the item may serve the next check. (A store call
   * that outlives its check, past a deadline, holds the item until it ends: it may still
   * read the key and cost.)
   */
  release(): void {
    if (--this.#holds === 0) this.#values = undefined;
  }
}

/** Gives a check's items back (see `takeItem`). */
export function release(items: readonly PreparedItem[]): void {
  for (let i = 0; i < items.length; i++) items[i]!.release();
}
