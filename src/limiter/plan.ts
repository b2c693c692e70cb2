import { algorithmOf } from '../algorithms/index.js';
import type { Algorithm } from '../algorithms/algorithm.js';
import type { Policy } from '../core/policy.js';
import { keyValue, scopeKeysOf } from '../stores/key.js';
import type { MemoryStore, ValueIndex } from '../stores/memory/memory-store.js';

/**
 * Policy resolution compiled once per policy set and descriptor shape, so a check does
 * no matching work that depends only on which keys a descriptor has: per shape (the
 * descriptor's keys, in order) the policies whose match keys are all present, each with
 * its algorithm, capacity and a key builder. What depends on values (fixed-value match
 * entries, cost rules, the bucket key itself) is still evaluated per check; with a
 * MemoryStore, a policy with one identity key and no scope needs no key at all, as the
 * store indexes its buckets by that key's value.
 */

/** A descriptor given as a record: `{ tenant: 'acme', route: 'GET /x' }`. */
export type DescriptorRecord = Readonly<Record<string, string>>;

/** One policy as seen from one descriptor shape. */
export interface PolicyPlan {
  readonly policy: Policy;
  readonly algorithm: Algorithm<unknown, unknown>;
  readonly capacity: number;
  readonly enforce: boolean;
  /** Match entries with a fixed value, checked per descriptor. */
  readonly fixed: readonly { readonly key: string; readonly value: string }[];
  /** The bucket key of a matching descriptor (same text as `bucketKey`). */
  readonly key: (d: DescriptorRecord) => string;
  /**
   * With a MemoryStore, for a policy with one identity key and no scope: that key, and
   * the store's index of the policy's buckets by its value (see `MemoryStore.decideIn`),
   * so a check needs no key text. Both `undefined` otherwise.
   */
  readonly valueKey: string | undefined;
  /** @internal The store's type, kept out of the declarations (stripInternal). */
  readonly index: ValueIndex | undefined;
}

/** One policy a record descriptor matched, with its bucket key and cost-rule cost. */
export interface RecordItem {
  readonly plan: PolicyPlan;
  readonly key: string;
  /** The cost the policy's cost rules give this record (before any `cost` option). */
  readonly cost: number;
  /** The store's handle on the bucket (see MemoryStore's `BucketRef`). */
  handle: unknown;
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

function values(keys: readonly string[], d: DescriptorRecord): string {
  let out = keyValue(d[keys[0]!] ?? '');
  for (let i = 1; i < keys.length; i++) out += `&${keyValue(d[keys[i]!] ?? '')}`;
  return out;
}

/**
 * The bucket key builder of a policy: the same text `bucketKey` (stores/key.ts) builds
 * from an entry list, read from a record, with the key layout worked out once.
 * (Remembering keys per value was measured: on Zipf over 100k keys the extra map lookup
 * cost as much as it saved.)
 */
function keyBuilder(policy: Policy): (d: DescriptorRecord) => string {
  const scopeKeys = scopeKeysOf(policy);
  const identity = policy.identity;
  const name = policy.name;
  if (identity.length === 0 && scopeKeys.length === 0) {
    const constant = `{@${name}}:${name}`;
    return () => constant;
  }
  const global = `@${name}`;
  if (scopeKeys.length === 0) return (d) => `{${values(identity, d)}}:${name}`;
  return (d) =>
    `{${identity.length === 0 ? global : values(identity, d)}}:${name}:${values(scopeKeys, d)}`;
}

/** The value index of a policy's buckets in `memory`, when its key is one identity value. */
function valueIndexOf(
  policy: Policy,
  memory: MemoryStore | undefined,
): { valueKey: string | undefined; index: ValueIndex | undefined } {
  const single = policy.identity.length === 1 && scopeKeysOf(policy).length === 0;
  const index = single ? memory?.valueIndex(policy.name) : undefined;
  return index === undefined
    ? { valueKey: undefined, index: undefined }
    : { valueKey: policy.identity[0]!, index };
}

/** Compiled resolution for one policy set. Immutable policies, so it is never stale. */
export class PolicyPlans {
  readonly #policies: readonly Policy[];
  readonly #byPolicy: readonly PolicyPlan[];
  #root: ShapeNode = { next: new Map(), plans: undefined };
  #shapes = 0;
  /**
   * What frozen record descriptors resolved to under these policies, by descriptor object.
   * A frozen record whose properties are all data properties cannot change, and neither
   * can the policies, so its matched policies, keys and costs are worked out once. Weak:
   * an entry lives as long as the caller keeps the descriptor.
   */
  readonly #records = new WeakMap<object, RecordMatch>();

  /** `memory`: the limiter's store when it is a MemoryStore (for value indexes). */
  constructor(policies: readonly Policy[], memory?: MemoryStore) {
    this.#policies = policies;
    this.#byPolicy = policies.map((policy): PolicyPlan => {
      const algorithm = algorithmOf(policy.algorithm);
      const { valueKey, index } = valueIndexOf(policy, memory);
      return {
        policy,
        algorithm,
        capacity: algorithm.capacity(policy.params),
        enforce: !policy.shadow,
        fixed: policy.match
          .filter((m) => m.value !== undefined)
          .map((m) => ({ key: m.key, value: m.value! })),
        key: keyBuilder(policy),
        valueKey,
        index,
      };
    });
  }

  /**
   * The plans of the policies whose match keys are all among `keys` (a validated
   * descriptor's keys, in order), in policy order. Fixed values are not checked here.
   */
  forShape(keys: readonly string[]): readonly PolicyPlan[] {
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
      return this.forShape(keys);
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
