import { algorithmOf } from '../algorithms/index.js';
import { systemClock, type Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import { toDescriptor, type Descriptor, type DescriptorInput } from '../core/descriptor.js';
import { PolicyError, StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { parsePolicies, type PolicyInput, type PolicySet } from '../config/policies.js';
import { bucketKey } from '../stores/key.js';
import type { Store, StoreRequest, StoreResult } from '../stores/store.js';
import { combineDecisions, type CheckResult } from './check-result.js';

export interface LimiterOptions {
  readonly store: Store;
  /** Validated policies (`loadPolicyFile`, `parsePolicies`) or plain inputs, validated here. */
  readonly policies: PolicySet | readonly PolicyInput[];
  /** @default the system clock (monotonic, wall-aligned) */
  readonly clock?: Clock;
  /** Longest descriptor value accepted, in UTF-16 code units. @default 1024 */
  readonly maxDescriptorValueLength?: number;
}

export interface CheckOptions {
  /**
   * Units this call consumes in every matched policy, overriding the policies' cost
   * rules. A non-negative safe integer; 0 reads without consuming.
   */
  readonly cost?: number;
  /**
   * Check only these policies (by name). Each must exist and match the descriptor;
   * otherwise the check throws. @default every policy the descriptor matches
   */
  readonly policies?: readonly string[];
}

function toPolicySet(p: PolicySet | readonly PolicyInput[]): PolicySet {
  return Array.isArray(p) ? parsePolicies(p) : (p as PolicySet);
}

function matches(policy: Policy, d: Descriptor): boolean {
  return policy.match.every((m) => {
    const e = d.find((x) => x.key === m.key);
    return e !== undefined && (m.value === undefined || e.value === m.value);
  });
}

function costOf(policy: Policy, d: Descriptor): number {
  for (const rule of policy.cost.rules) {
    if (rule.when.every((w) => d.some((e) => e.key === w.key && e.value === w.value)))
      return rule.cost;
  }
  return policy.cost.defaultCost;
}

/**
 * Decides requests against policies through a store. All matched policies are checked
 * in one store batch, all-or-nothing; see {@link Limiter.check}.
 */
export class Limiter {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #maxValueLength: number;
  #set: PolicySet;

  constructor(options: LimiterOptions) {
    this.#store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.#maxValueLength = options.maxDescriptorValueLength ?? 1024;
    this.#set = this.#accept(options.policies);
  }

  #accept(policies: PolicySet | readonly PolicyInput[]): PolicySet {
    const set = toPolicySet(policies);
    for (const p of set.policies) this.#store.checkPolicy?.(p);
    return set;
  }

  /** The policies in force. */
  get policies(): readonly Policy[] {
    return this.#set.policies;
  }

  /**
   * Replaces the policies atomically: a check in flight uses the old set or the new one,
   * never a mix. Invalid input throws and keeps the current set. Buckets of policies
   * that keep their name and key shape keep their state.
   */
  setPolicies(policies: PolicySet | readonly PolicyInput[]): void {
    this.#set = this.#accept(policies);
  }

  /** {@link Limiter.checkAt} at the limiter clock's current time. */
  check(descriptor: DescriptorInput, options: CheckOptions = {}): Promise<CheckResult> {
    return this.checkAt(this.#clock.nowMs(), descriptor, options);
  }

  /**
   * Checks a request at `nowMs` against every policy its descriptor matches (or the
   * named ones) and consumes each policy's cost only if every enforced policy admits
   * it. Over-limit and store failures are results, never rejections: a store failure
   * becomes each policy's failure mode (`open` allows, `closed` denies with
   * `UNAVAILABLE`). Rejects with a `PolicyError` for invalid input: a malformed or
   * empty descriptor, an invalid cost, a cost above a policy's capacity, an unknown
   * policy name or a named policy the descriptor does not match.
   */
  async checkAt(
    nowMs: number,
    descriptor: DescriptorInput,
    options: CheckOptions = {},
  ): Promise<CheckResult> {
    const policies = this.#set.policies; // one read: reloads never mix sets within a check
    const d = toDescriptor(descriptor, this.#maxValueLength);
    const selected = this.#select(policies, d, options.policies);
    if (options.cost !== undefined) validateCost(options.cost);
    const batch: StoreRequest[] = selected.map((policy) => {
      const algorithm = algorithmOf(policy.algorithm);
      const cost = options.cost ?? costOf(policy, d);
      const capacity = algorithm.capacity(policy.params);
      if (cost > capacity) {
        throw new PolicyError(
          'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
          `cost ${cost} exceeds the capacity ${capacity} of policy "${policy.name}": it could never be admitted`,
        );
      }
      return {
        key: bucketKey(policy, d),
        algorithm,
        params: policy.params,
        cost,
        enforce: !policy.shadow,
      };
    });
    if (batch.length === 0) return combineDecisions([]);

    let results: readonly StoreResult[];
    try {
      results = await this.#store.apply(batch, { nowMs });
    } catch (cause) {
      const error =
        cause instanceof StoreError
          ? cause
          : new StoreError(
              'SLUICE_ERR_STORE_UNAVAILABLE',
              `store failed: ${(cause as Error)?.message ?? String(cause)}`,
              { cause },
            );
      results = batch.map(() => ({ ok: false as const, error }));
    }
    // A batch is atomic: if any item failed, nothing is known about the others.
    const failed = results.some((r) => !r.ok);
    const decisions = selected.map((policy, i): Decision => {
      const r = results[i];
      if (failed || r === undefined || !r.ok) return failureDecision(policy, batch[i]!);
      return { ...r.decision, policy: policy.name, path: policy.shadow ? 'shadow' : 'store' };
    });
    return combineDecisions(decisions);
  }

  #select(
    policies: readonly Policy[],
    d: Descriptor,
    names: readonly string[] | undefined,
  ): Policy[] {
    if (names === undefined) return policies.filter((p) => matches(p, d));
    return names.map((name) => {
      const p = policies.find((x) => x.name === name);
      if (p === undefined) {
        throw new PolicyError(
          'SLUICE_ERR_POLICY_UNKNOWN',
          `unknown policy "${name}"; loaded: ${policies.map((x) => x.name).join(', ') || '(none)'}`,
        );
      }
      if (!matches(p, d)) {
        const need = p.match
          .map((m) => (m.value === undefined ? m.key : `${m.key}=${m.value}`))
          .join(', ');
        throw new PolicyError(
          'SLUICE_ERR_DESCRIPTOR_UNMATCHED',
          `descriptor does not match policy "${name}", which needs: ${need}`,
        );
      }
      return p;
    });
  }
}

function validateCost(cost: unknown): void {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new PolicyError(
      'SLUICE_ERR_COST_INVALID',
      `cost must be a non-negative safe integer, got ${typeof cost === 'number' ? String(cost) : typeof cost}`,
    );
  }
}

function failureDecision(policy: Policy, request: StoreRequest): Decision {
  const limit = request.algorithm.capacity(request.params);
  const base = { limit, retryAfterMs: 0, resetAfterMs: 0, policy: policy.name };
  if (policy.shadow || policy.failureMode === 'open') {
    // Nothing is known about the bucket; report no remaining capacity rather than invent some.
    return {
      ...base,
      status: 'OK',
      allowed: true,
      remaining: 0,
      path: policy.shadow ? 'shadow' : 'fail-open',
    };
  }
  return { ...base, status: 'UNAVAILABLE', allowed: false, remaining: 0, path: 'fail-closed' };
}

/** Creates a {@link Limiter}. Throws a `PolicyError` when plain policy inputs are invalid. */
export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options);
}
