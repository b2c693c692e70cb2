import { toDescriptor, type Descriptor, type DescriptorInput } from '../core/descriptor.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import { PolicyError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { descriptorValues, type DescriptorValues } from '../stores/key.js';
import { costExceeds, validateCost } from './check-input.js';
import {
  matchedItems,
  type DescriptorRecord,
  type PolicyPlans,
  type RecordItem,
  type RecordMatch,
} from './plan.js';
import { PlanQuery, type QueryPlans } from './plan-query.js';
import { release, takeItem, type PolicyPlan, type PreparedItem } from './policy-plan.js';

/** What a check asks of resolution (see `CheckOptions`). */
export interface ResolveOptions {
  readonly cost?: number;
  readonly policies?: readonly string[];
}

export function matches(policy: Policy, d: Descriptor): boolean {
  return policy.match.every((m) => {
    const e = d.find((x) => x.key === m.key);
    return e !== undefined && (m.value === undefined || e.value === m.value);
  });
}

/** The cost `policy`'s cost rules give a descriptor's values: the first rule that fits. */
export function costOf(policy: Policy, d: DescriptorValues): number {
  const rules = policy.cost.rules;
  for (let i = 0; i < rules.length; i++) {
    const when = rules[i]!.when;
    let all = true;
    for (let j = 0; j < when.length; j++) {
      const w = when[j]!;
      if (!Object.hasOwn(d, w.key) || d[w.key] !== w.value) all = false;
    }
    if (all) return rules[i]!.cost;
  }
  return policy.cost.defaultCost;
}

/** No items (a record whose shape fits one policy but not its fixed values). */
const NO_ITEMS: readonly PreparedItem[] = Object.freeze([]);

/**
 * Resolve, the first part of a check: a descriptor to prepared items, one per matched
 * policy, each with its compiled plan, bucket key (or key-space value) and cost; a
 * {@link PlanQuery} (limits a rule set matched, the envoy rules) to the items of its
 * specs' plans.
 */
export class Resolver {
  readonly #limits: DescriptorLimits;
  readonly #queries: QueryPlans;

  constructor(limits: DescriptorLimits, queries: QueryPlans) {
    this.#limits = limits;
    this.#queries = queries;
  }

  /**
   * The items of a check of `descriptor` against `plans`. Throws a `PolicyError` for a
   * malformed descriptor, an invalid cost, a cost above a policy's capacity, or a named
   * policy that is unknown or not matched (and as `QueryPlans.prepare` for a query).
   */
  resolve(
    plans: PolicyPlans,
    descriptor: DescriptorInput | PlanQuery,
    options: ResolveOptions,
  ): readonly PreparedItem[] {
    // Before the record path, which would take a query's keys only to find it no record.
    if (descriptor instanceof PlanQuery) return this.#query(descriptor, options);
    if (
      options.policies === undefined &&
      typeof descriptor === 'object' &&
      descriptor !== null &&
      !Array.isArray(descriptor)
    ) {
      const items = this.#prepareRecord(descriptor as DescriptorRecord, plans, options);
      // Anything unusual takes the general path, which reports it exactly.
      if (items !== undefined) return items;
    }
    return this.#general(plans, descriptor, options);
  }

  /** The items of a plan query (see {@link QueryPlans.prepare}). */
  #query(query: PlanQuery, options: ResolveOptions): readonly PreparedItem[] {
    if (options.policies !== undefined) {
      throw new PolicyError(
        'SLUICE_ERR_POLICY_UNSUPPORTED',
        'the policies option selects policies of a descriptor; a plan query names its limits itself',
      );
    }
    return this.#queries.prepare(query, options.cost);
  }

  /**
   * The items of any descriptor, resolved afresh (every input the record fast path does
   * not take, and named policies); reports malformed input exactly.
   */
  #general(
    plans: PolicyPlans,
    descriptor: DescriptorInput,
    options: ResolveOptions,
  ): readonly PreparedItem[] {
    const d = toDescriptor(descriptor, this.#limits);
    const selected = this.#select(plans, d, options.policies);
    const override = options.cost;
    if (override !== undefined) validateCost(override);
    const values = descriptorValues(d);
    const items: PreparedItem[] = [];
    for (const plan of selected) {
      const cost = override ?? costOf(plan.policy, values);
      if (cost > plan.capacity) {
        release(items);
        throw costExceeds(cost, plan.capacity, plan.policy);
      }
      items.push(takeItem(plan).prepare(cost, plan.key(values), undefined, undefined));
    }
    return items;
  }

  /**
   * The items of a record descriptor, through the compiled plans: a remembered frozen
   * record by what it resolved to; a record whose shape matches one policy with no key
   * text (its key is built only if read); anything else resolved afresh. `undefined`
   * when `toDescriptor` would not accept the record as is.
   */
  #prepareRecord(
    record: DescriptorRecord,
    plans: PolicyPlans,
    options: ResolveOptions,
  ): readonly PreparedItem[] | undefined {
    const frozen = Object.isFrozen(record);
    let match = frozen ? plans.recall(record) : undefined;
    if (match === undefined) {
      const keys = plans.keysIfLast(record) ?? Object.keys(record);
      if (!this.#plainRecord(record, keys)) return undefined;
      const candidates = plans.forShape(keys);
      if (candidates.length === 1 && !frozen)
        return this.#prepareOne(candidates[0]!, record, options);
      match = this.#resolveRecord(record, keys, candidates, plans);
    }
    const override = options.cost;
    if (override !== undefined) validateCost(override);
    if (!Array.isArray(match)) {
      const one = match as RecordItem;
      const plan = one.plan;
      const cost = override ?? one.cost;
      if (cost > plan.capacity) throw costExceeds(cost, plan.capacity, plan.policy);
      const item = takeItem(plan).prepare(cost, one.key, undefined, one.value);
      return item === plan.spare ? plan.alone : [item];
    }
    return this.#prepareMatched(matchedItems(match), override);
  }

  /** The items of a record that matched several policies (or none). */
  #prepareMatched(matched: readonly RecordItem[], override: number | undefined): PreparedItem[] {
    for (const m of matched) {
      const cost = override ?? m.cost;
      if (cost > m.plan.capacity) throw costExceeds(cost, m.plan.capacity, m.plan.policy);
    }
    const items: PreparedItem[] = [];
    for (const m of matched) {
      items.push(takeItem(m.plan).prepare(override ?? m.cost, m.key, undefined, m.value));
    }
    return items;
  }

  /**
   * The item of a record whose shape matches one policy: no key text unless something
   * reads it (the store finds the bucket in its key space by the value). `undefined` when
   * a property changed between reads (a getter), for the general path to report.
   */
  #prepareOne(
    plan: PolicyPlan,
    record: DescriptorRecord,
    options: ResolveOptions,
  ): readonly PreparedItem[] | undefined {
    const override = options.cost;
    if (override !== undefined) validateCost(override);
    const fixed = plan.fixed;
    for (let j = 0; j < fixed.length; j++) {
      if (record[fixed[j]!.key] !== fixed[j]!.value) return NO_ITEMS;
    }
    let value: string | undefined;
    if (plan.valueKey !== undefined) {
      value = record[plan.valueKey];
      if (typeof value !== 'string') return undefined; // a getter that changed its mind
    }
    const policy = plan.policy;
    const cost = override ?? costOf(policy, record);
    if (cost > plan.capacity) throw costExceeds(cost, plan.capacity, policy);
    const item = takeItem(plan).prepare(cost, undefined, record, value);
    return item === plan.spare ? plan.alone : [item];
  }

  /** Whether `toDescriptor` would accept the record as is (so the fast path may skip it). */
  #plainRecord(record: DescriptorRecord, keys: readonly string[]): boolean {
    const limits = this.#limits;
    if (keys.length === 0 || keys.length > limits.maxDescriptorEntries) return false;
    const maxKey = limits.maxDescriptorKeyLength;
    const max = limits.maxDescriptorValueLength;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const v = record[k];
      if (
        k.length === 0 ||
        k.length > maxKey ||
        typeof v !== 'string' ||
        v.length > max ||
        !k.isWellFormed() ||
        !v.isWellFormed()
      ) {
        return false;
      }
    }
    return true;
  }

  /**
   * The policies a valid record descriptor (own keys `keys`) matches among `candidates`
   * (the plans of its shape), with bucket keys and costs; remembered when the record
   * cannot change.
   */
  #resolveRecord(
    record: DescriptorRecord,
    keys: readonly string[],
    candidates: readonly PolicyPlan[],
    plans: PolicyPlans,
  ): RecordMatch {
    const items: RecordItem[] = [];
    for (let i = 0; i < candidates.length; i++) {
      const plan = candidates[i]!;
      let fits = true;
      for (let j = 0; j < plan.fixed.length; j++) {
        const f = plan.fixed[j]!;
        if (record[f.key] !== f.value) fits = false;
      }
      if (fits) {
        items.push({
          plan,
          key: plan.key(record),
          value: plan.valueKey === undefined ? undefined : record[plan.valueKey],
          cost: costOf(plan.policy, record),
        });
      }
    }
    const match = items.length === 1 ? items[0]! : items;
    plans.remember(record, keys, match);
    return match;
  }

  /** The plans of the policies a validated descriptor selects: the named ones, else every match. */
  #select(
    plans: PolicyPlans,
    d: Descriptor,
    names: readonly string[] | undefined,
  ): readonly PolicyPlan[] {
    if (names === undefined) return plans.plans.filter((p) => matches(p.policy, d));
    return names.map((name) => {
      const plan = plans.byName(name);
      if (plan === undefined) {
        throw new PolicyError(
          'SLUICE_ERR_POLICY_UNKNOWN',
          `unknown policy "${name}"; loaded: ${plans.policies.map((x) => x.name).join(', ') || '(none)'}`,
        );
      }
      const p = plan.policy;
      if (!matches(p, d)) {
        const need = p.match
          .map((m) => (m.value === undefined ? m.key : `${m.key}=${m.value}`))
          .join(', ');
        throw new PolicyError(
          'SLUICE_ERR_DESCRIPTOR_UNMATCHED',
          `descriptor does not match policy "${name}", which needs: ${need}`,
        );
      }
      return plan;
    });
  }
}
