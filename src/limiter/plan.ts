import type { Policy } from '../core/policy.js';
import type { Store } from '../stores/store.js';
import { planOf, type PolicyPlan } from './policy-plan.js';
import type { Stage } from './stage.js';

/**
 * Policy resolution compiled once per policy set and descriptor shape, so a check does
 * no matching work that depends only on which keys a descriptor has: per shape (the
 * descriptor's keys, in order) the policies whose match keys are all present, each with
 * its algorithm, capacity, key builder, the stages that apply to it and, when the store
 * offers one, the key space its buckets are found in by one identity value (no key text
 * per check). What depends on values (fixed-value match entries, cost rules, the bucket
 * key itself) is still evaluated per check.
 */

/** A descriptor given as a record: `{ tenant: 'acme', route: 'GET /x' }`. */
export type DescriptorRecord = Readonly<Record<string, string>>;

export type { PolicyPlan };

/** One policy a record descriptor matched, with its bucket key and cost-rule cost. */
export interface RecordItem {
  readonly plan: PolicyPlan;
  readonly key: string;
  /** The raw value of the plan's `valueKey`, when it has one. */
  readonly value: string | undefined;
  /** The cost the policy's cost rules give this record (before any `cost` option). */
  readonly cost: number;
}

/**
 * The policies a record descriptor matched: the item itself when exactly one matched (one
 * object fewer to reach per check), else the list (possibly empty).
 */
export type RecordMatch = RecordItem | readonly RecordItem[];

/** The items of a {@link RecordMatch}, as a list. */
export function matchedItems(m: RecordMatch): readonly RecordItem[] {
  return Array.isArray(m) ? (m as readonly RecordItem[]) : [m as RecordItem];
}

interface ShapeNode {
  readonly next: Map<string, ShapeNode>;
  plans: readonly PolicyPlan[] | undefined;
}

/** Distinct descriptor shapes remembered per policy set before the cache starts over. */
const MAX_SHAPES = 1024;

/** Compiled resolution for one policy set. Immutable policies, so it is never stale. */
export class PolicyPlans {
  readonly #policies: readonly Policy[];
  readonly #byPolicy: readonly PolicyPlan[];
  readonly #byName: ReadonlyMap<string, PolicyPlan>;
  #root: ShapeNode = { next: new Map(), plans: undefined };
  #shapes = 0;
  /**
   * What frozen record descriptors resolved to under these policies, by descriptor object.
   * A frozen record whose properties are all data properties cannot change, and neither
   * can the policies, so its matched policies, keys and costs are worked out once. Weak:
   * an entry lives as long as the caller keeps the descriptor.
   */
  readonly #records = new WeakMap<object, RecordMatch>();
  /**
   * The keys and plans of the last shape {@link PolicyPlans.forShape} looked up: checks
   * mostly come in one shape, which {@link PolicyPlans.keysIfLast} then recognises without
   * an `Object.keys` array or a walk of the shape tree.
   */
  #lastKeys: readonly string[] = [];
  #lastPlans: readonly PolicyPlan[] = [];

  /** `store` and `stages`: the limiter's (for key spaces and the stages of each policy). */
  constructor(policies: readonly Policy[], store?: Store, stages: readonly Stage[] = []) {
    this.#policies = policies;
    this.#byPolicy = policies.map((policy) => planOf(policy, store, stages));
    this.#byName = new Map(this.#byPolicy.map((p) => [p.policy.name, p]));
  }

  /** The plan of a policy of this set, by name. */
  byName(name: string): PolicyPlan | undefined {
    return this.#byName.get(name);
  }

  /** The plans in policy order. */
  get plans(): readonly PolicyPlan[] {
    return this.#byPolicy;
  }

  /**
   * The plans of the policies whose match keys are all among `keys` (a validated
   * descriptor's keys, in order), in policy order. Fixed values are not checked here.
   */
  forShape(keys: readonly string[]): readonly PolicyPlan[] {
    if (keys === this.#lastKeys) return this.#lastPlans;
    const plans = this.#lookUp(keys);
    this.#lastKeys = keys;
    this.#lastPlans = plans;
    return plans;
  }

  /**
   * The keys array of the last shape looked up when `record`'s own enumerable keys are
   * those, in that order (as `Object.keys` would list them); else `undefined`.
   */
  keysIfLast(record: DescriptorRecord): readonly string[] | undefined {
    const last = this.#lastKeys;
    let i = 0;
    for (const k in record) {
      if (i === last.length || last[i] !== k || !Object.hasOwn(record, k)) return undefined;
      i++;
    }
    return i === last.length && i > 0 ? last : undefined;
  }

  #lookUp(keys: readonly string[]): readonly PolicyPlan[] {
    let node = this.#root;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      let child = node.next.get(k);
      if (child === undefined) {
        child = { next: new Map(), plans: undefined };
        node.next.set(k, child);
      }
      node = child;
    }
    if (node.plans !== undefined) return node.plans;
    const present = new Set(keys);
    const plans = this.#byPolicy.filter((p) => p.policy.match.every((m) => present.has(m.key)));
    if (++this.#shapes > MAX_SHAPES) {
      // Unbounded distinct shapes would grow the tree: start over (correct, just colder).
      this.#root = { next: new Map(), plans: undefined };
      this.#shapes = 0;
      return this.#lookUp(keys);
    }
    node.plans = plans;
    return plans;
  }

  get policies(): readonly Policy[] {
    return this.#policies;
  }

  /** What `record` resolved to, if it was remembered (see {@link PolicyPlans.remember}). */
  recall(record: DescriptorRecord): RecordMatch | undefined {
    return this.#records.get(record);
  }

  /**
   * Remembers what `record` (validated, with own keys `keys`) resolved to, when it cannot
   * change: frozen, with data properties only (a getter could answer differently per call).
   */
  remember(record: DescriptorRecord, keys: readonly string[], match: RecordMatch): void {
    if (!Object.isFrozen(record)) return;
    for (let i = 0; i < keys.length; i++) {
      const property = Object.getOwnPropertyDescriptor(record, keys[i]!);
      if (property === undefined || !('value' in property)) return;
    }
    this.#records.set(record, match);
  }
}
