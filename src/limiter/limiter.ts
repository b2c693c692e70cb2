import { algorithmOf } from '../algorithms/index.js';
import { systemClock, type Clock } from '../core/clock.js';
import type { AlgorithmDecision, Decision } from '../core/decision.js';
import { toDescriptor, type Descriptor, type DescriptorInput } from '../core/descriptor.js';
import { descriptorLimits, type DescriptorLimits } from '../core/descriptor-limits.js';
import { PolicyError, StoreError } from '../core/errors.js';
import type { Policy } from '../core/policy.js';
import { parsePolicies, type PolicyInput, type PolicySet } from '../config/policies.js';
import type { Registry } from 'prom-client';
import type { CheckRecorder } from '../metrics/check-recorder.js';
import { LimiterMetrics } from '../metrics/limiter-metrics.js';
import { bucketKey } from '../stores/key.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import type { Store, StoreApplyOptions, StoreRequest, StoreResult } from '../stores/store.js';
import { combineDecisions, type CheckResult } from './check-result.js';
import {
  matchedItems,
  PolicyPlans,
  type DescriptorRecord,
  type PolicyPlan,
  type RecordItem,
  type RecordMatch,
} from './plan.js';
import { StaleBudgets } from './stale-budgets.js';
import { Deadlines, type Deadline } from './deadlines.js';

/**
 * Options of {@link createLimiter}. The descriptor limits (`maxDescriptorEntries`,
 * `maxDescriptorKeyLength`, `maxDescriptorValueLength`; see `DescriptorLimits`) bound
 * what `check` accepts; their defaults are 32 entries, 256 and 1024 UTF-16 code units.
 */
export interface LimiterOptions extends Partial<Omit<DescriptorLimits, 'maxDescriptors'>> {
  readonly store: Store;
  /** Validated policies (`loadPolicyFile`, `parsePolicies`) or plain inputs, validated here. */
  readonly policies: PolicySet | readonly PolicyInput[];
  /** @default the system clock (monotonic, wall-aligned) */
  readonly clock?: Clock;
  /** Told how each call to an asynchronous store ended. @default none */
  readonly storeObserver?: StoreCallObserver;
  /**
   * Where the limiter's metrics go: a `LimiterMetrics` (keep it to read `hotKeys()`), or
   * any `CheckRecorder`. See docs/metrics.md. @default none, or one made in `registry`
   */
  readonly metrics?: CheckRecorder;
  /**
   * A prom-client registry to register the limiter's metrics in (a `LimiterMetrics` with
   * default options, read back from {@link Limiter.metrics}). Ignored with `metrics`.
   * @default none: no metrics
   */
  readonly registry?: Registry;
}

/** What ended a failed store call. */
export type StoreCallEnd =
  /** The store failed, or did not answer within the policies' timeout. */
  | 'store'
  /** The caller's `timeoutMs`, shorter than the policies' timeout, ran out first. */
  | 'deadline'
  /** The caller's `signal` aborted the wait. */
  | 'cancel';

/**
 * Told how each store call ended, once per call (not per policy): for health tracking
 * and failure counters. Calls decided in process (MemoryStore) are not reported.
 */
export interface StoreCallObserver {
  /** The store answered: every request of the batch was decided. */
  answered(): void;
  /**
   * The call gave no decision; the policies' failure modes decided. With `endedBy`
   * `deadline` or `cancel` nothing is known about the store itself.
   */
  failed(error: StoreError, endedBy: StoreCallEnd): void;
}

/** One bucket decision of a {@link Limiter.decideAt} batch. */
export interface CheckItem {
  readonly policy: Policy;
  readonly descriptor: Descriptor;
  /** Units to consume: a non-negative safe integer within the policy's capacity. */
  readonly cost: number;
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
  /**
   * The caller's own budget for this check, in ms: the store is never waited on longer
   * than this or than any matched policy's `timeout`.
   */
  readonly timeoutMs?: number;
  /**
   * The caller's cancellation: when it aborts, the check stops waiting for the store and
   * the policies' failure modes decide (the store may still apply the consume).
   */
  readonly signal?: AbortSignal;
  /**
   * Makes the consume idempotent: a retry with the same id within the store's dedup TTL
   * returns the first decision without charging again. Ids are scoped to the identity
   * (hash tag) of the first matched policy's bucket: use ids unique per request. Up to 128
   * characters. Without it, nothing is ever retried automatically.
   */
  readonly requestId?: string;
}

/** Options of {@link Limiter.decideAt}. */
export interface DecideOptions extends Pick<CheckOptions, 'timeoutMs' | 'requestId' | 'signal'> {
  /**
   * Decide every item on its own instead of all-or-nothing: each is a batch of one, in
   * item order, all in one store call, so a denial blocks nothing else and a later item on
   * the same bucket sees what an earlier one consumed (envoyproxy/ratelimit's counting).
   * A store failure then applies each item's failure mode on its own.
   * @default false
   */
  readonly independent?: boolean;
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
  readonly #limits: DescriptorLimits;
  /** The policies in force and their compiled resolution, swapped together. */
  #current: PolicyPlans;
  readonly #stale = new StaleBudgets();
  readonly #deadlines = new Deadlines();
  readonly #observer: StoreCallObserver | undefined;
  /** The store when it is a MemoryStore, which decides a one-bucket check directly. */
  readonly #memory: MemoryStore | undefined;
  readonly #metrics: CheckRecorder | undefined;

  constructor(options: LimiterOptions) {
    this.#store = options.store;
    this.#memory = options.store instanceof MemoryStore ? options.store : undefined;
    this.#clock = options.clock ?? systemClock;
    this.#limits = descriptorLimits(options);
    this.#observer = options.storeObserver;
    this.#metrics =
      options.metrics ??
      (options.registry === undefined
        ? undefined
        : new LimiterMetrics({ registry: options.registry }));
    this.#current = this.#accept(options.policies);
  }

  #accept(policies: PolicySet | readonly PolicyInput[]): PolicyPlans {
    const set = toPolicySet(policies);
    for (const p of set.policies) this.#store.checkPolicy?.(p);
    this.#store.checkPolicies?.(set.policies);
    return new PolicyPlans(set.policies, this.#memory);
  }

  /** The recorder the limiter reports to (`metrics`, or the one made in `registry`). */
  get metrics(): CheckRecorder | undefined {
    return this.#metrics;
  }

  /** The policies in force. */
  get policies(): readonly Policy[] {
    return this.#current.policies;
  }

  /**
   * Replaces the policies atomically: a check in flight uses the old set or the new one,
   * never a mix. Invalid input throws and keeps the current set. Buckets of policies
   * that keep their name and key shape keep their state.
   */
  setPolicies(policies: PolicySet | readonly PolicyInput[]): void {
    this.#current = this.#accept(policies);
  }

  /** {@link Limiter.checkAt} at the limiter clock's current time. */
  check(descriptor: DescriptorInput, options: CheckOptions = NO_OPTIONS): Promise<CheckResult> {
    return this.checkAt(this.#nowMs(), descriptor, options);
  }

  /**
   * Whether the store decides synchronously (it implements `applySync`, as MemoryStore
   * does), so {@link Limiter.checkSync} can be used.
   */
  get synchronous(): boolean {
    return this.#store.applySync !== undefined;
  }

  /** {@link Limiter.checkSyncAt} at the limiter clock's current time. */
  checkSync(descriptor: DescriptorInput, options: CheckOptions = NO_OPTIONS): CheckResult {
    return this.checkSyncAt(this.#nowMs(), descriptor, options);
  }

  /**
   * {@link Limiter.checkAt} without a promise, for a store that decides in process
   * (MemoryStore; see {@link Limiter.synchronous}): the same decision, the same
   * all-or-nothing batch and failure modes, returned directly. Throws the `PolicyError`s
   * that `checkAt` rejects with, and a `TypeError` when the store is not synchronous.
   */
  checkSyncAt(
    nowMs: number,
    descriptor: DescriptorInput,
    options: CheckOptions = NO_OPTIONS,
  ): CheckResult {
    if (this.#store.applySync === undefined) {
      throw new TypeError(
        'Limiter.checkSync needs a store that decides synchronously (such as MemoryStore); use check()',
      );
    }
    const m = this.#metrics;
    if (m !== undefined) {
      return measured(m, () => this.#check(nowMs, descriptor, options)) as CheckResult;
    }
    return this.#check(nowMs, descriptor, options) as CheckResult;
  }

  /** The clock's reading; the system clock's time origin is read once, not per check. */
  #nowMs(): number {
    return this.#clock === systemClock ? TIME_ORIGIN + performance.now() : this.#clock.nowMs();
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
  checkAt(
    nowMs: number,
    descriptor: DescriptorInput,
    options: CheckOptions = NO_OPTIONS,
  ): Promise<CheckResult> {
    // Not async: on a synchronous store (MemoryStore) the result is ready at once, and
    // an already-resolved promise is all a check costs beyond the decision itself.
    const m = this.#metrics;
    if (m !== undefined)
      return settled(() => measured(m, () => this.#check(nowMs, descriptor, options)));
    try {
      const result = this.#check(nowMs, descriptor, options);
      return result instanceof Promise ? result : Promise.resolve(result);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  #check(
    nowMs: number,
    descriptor: DescriptorInput,
    options: CheckOptions,
  ): CheckResult | Promise<CheckResult> {
    const plans = this.#current; // one read: reloads never mix sets within a check
    if (
      options.policies === undefined &&
      typeof descriptor === 'object' &&
      descriptor !== null &&
      !Array.isArray(descriptor)
    ) {
      const result = this.#checkRecord(nowMs, descriptor as DescriptorRecord, plans, options);
      // Anything unusual takes the general path, which reports it exactly.
      if (result !== undefined) return result;
    }
    const d = toDescriptor(descriptor, this.#limits);
    const selected = this.#select(plans.policies, d, options.policies);
    if (options.cost !== undefined) validateCost(options.cost);
    const items = selected.map((policy) => ({
      policy,
      descriptor: d,
      cost: options.cost ?? costOf(policy, d),
    }));
    return this.#decide(nowMs, items, options, true);
  }

  /**
   * {@link Limiter.checkAt} for a record descriptor, through the compiled plans: a
   * remembered frozen record by what it resolved to; a record matching one policy whose
   * bucket is in a value index of the memory store by its value alone (no key text);
   * anything else resolved afresh. `undefined` when `toDescriptor` would not accept the
   * record as is.
   */
  #checkRecord(
    nowMs: number,
    record: DescriptorRecord,
    plans: PolicyPlans,
    options: CheckOptions,
  ): CheckResult | Promise<CheckResult> | undefined {
    const frozen = Object.isFrozen(record);
    if (frozen) {
      const remembered = plans.recall(record);
      if (remembered !== undefined) return this.#checkMatch(nowMs, remembered, options);
    }
    const keys = Object.keys(record);
    if (!this.#plainRecord(record, keys)) return undefined;
    const candidates = plans.forShape(keys);
    if (candidates.length === 1 && !frozen && options.requestId === undefined) {
      const result = this.#checkValue(nowMs, candidates[0]!, record, options);
      if (result !== undefined) return result;
    }
    return this.#checkMatch(nowMs, this.#resolveRecord(record, keys, candidates, plans), options);
  }

  /**
   * The one-policy check of a record on the memory store's value index of `plan`;
   * `undefined` when the plan has none, the record does not fit its fixed values or the
   * store is closed (the general path then decides or reports).
   */
  #checkValue(
    nowMs: number,
    plan: PolicyPlan,
    record: DescriptorRecord,
    options: CheckOptions,
  ): CheckResult | undefined {
    const index = plan.index;
    if (index === undefined) return undefined;
    const fixed = plan.fixed;
    for (let j = 0; j < fixed.length; j++) {
      if (record[fixed[j]!.key] !== fixed[j]!.value) return undefined;
    }
    const value = record[plan.valueKey!];
    if (typeof value !== 'string') return undefined; // a getter that changed its mind
    const override = options.cost;
    if (override !== undefined) validateCost(override);
    const policy = plan.policy;
    const cost = override ?? recordCost(policy, record);
    if (cost > plan.capacity) throw costExceeds(cost, plan.capacity, policy);
    validateTimeout(options.timeoutMs);
    this.#metrics?.bucket(policy.name, plan.key(record), cost, nowMs);
    const d = this.#memory!.decideIn(index, value, plan.algorithm, policy.params, cost, nowMs);
    if (d === undefined) return undefined;
    if (policy.failureMode === 'stale') this.#stale.record(plan.key(record), d, nowMs);
    return combineDecisions([withPolicy(d, policy.name, policy.shadow ? 'shadow' : 'store')]);
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
          cost: recordCost(plan.policy, record),
          handle: undefined,
        });
      }
    }
    const match = items.length === 1 ? items[0]! : items;
    plans.remember(record, keys, match);
    return match;
  }

  /** {@link Limiter.checkAt} for the policies a valid record descriptor matched. */
  #checkMatch(
    nowMs: number,
    match: RecordMatch,
    options: CheckOptions,
  ): CheckResult | Promise<CheckResult> {
    const override = options.cost;
    if (override !== undefined) validateCost(override);
    const memory = this.#memory;
    if (!Array.isArray(match) && memory !== undefined && options.requestId === undefined) {
      // One bucket in the memory store: no batch, no store result, no promise.
      const item = match as RecordItem;
      const plan = item.plan;
      const cost = override ?? item.cost;
      const policy = plan.policy;
      if (cost > plan.capacity) throw costExceeds(cost, plan.capacity, policy);
      validateTimeout(options.timeoutMs);
      this.#metrics?.bucket(policy.name, item.key, cost, nowMs);
      const d = memory.decideOne(item, plan.algorithm, policy.params, cost, nowMs);
      // undefined: the store is closed, and the general path reports that.
      if (d !== undefined) {
        if (policy.failureMode === 'stale') this.#stale.record(item.key, d, nowMs);
        return combineDecisions([withPolicy(d, policy.name, policy.shadow ? 'shadow' : 'store')]);
      }
    }
    const items = matchedItems(match);
    const selected: Policy[] = [];
    const batch: StoreRequest[] = [];
    for (let i = 0; i < items.length; i++) {
      const { plan, key } = items[i]!;
      const policy = plan.policy;
      const cost = override ?? items[i]!.cost;
      if (cost > plan.capacity) throw costExceeds(cost, plan.capacity, policy);
      selected.push(policy);
      batch.push({
        key,
        algorithm: plan.algorithm,
        params: policy.params,
        cost,
        enforce: plan.enforce,
      });
    }
    return this.#run(nowMs, selected, batch, options);
  }

  /**
   * The lower-level form of {@link Limiter.checkAt} for callers that resolve policies
   * themselves (the Envoy-compatible service matches its own rule tree): decides the
   * given (policy, descriptor, cost) items as one all-or-nothing batch (or each on its
   * own: `independent`), with the same deadlines, failure modes and idempotency. Policies
   * need not be in the limiter's set, but must come from `parsePolicies` (validated), or
   * from an algorithm's `chargingDenied` (then only with `independent`).
   *
   * The cost is the request's, so a cost above a policy's capacity is a decision here,
   * not an error: `OVER_LIMIT` with `retryAfterMs` Infinity (it can never fit). Rejects
   * with a `PolicyError` for an invalid cost.
   */
  decideAt(
    nowMs: number,
    items: readonly CheckItem[],
    options: DecideOptions = {},
  ): Promise<CheckResult> {
    const m = this.#metrics;
    return settled(() =>
      m === undefined
        ? this.#decide(nowMs, items, options, false)
        : measured(m, () => this.#decide(nowMs, items, options, false)),
    );
  }

  /** `rejectOversized`: a cost above capacity throws (checkAt) instead of being decided. */
  #decide(
    nowMs: number,
    items: readonly CheckItem[],
    options: DecideOptions,
    rejectOversized: boolean,
  ): CheckResult | Promise<CheckResult> {
    const selected = items.map((i) => i.policy);
    const independent = options.independent === true;
    const batch: StoreRequest[] = items.map(({ policy, descriptor: d, cost }) => {
      validateCost(cost);
      const algorithm = algorithmOf(policy.algorithm);
      if (!independent && algorithm.chargesDenied?.(policy.params) === true) {
        throw new PolicyError(
          'SLUICE_ERR_POLICY_UNSUPPORTED',
          `policy "${policy.name}" charges denied requests, which an all-or-nothing decision cannot undo; decide it with independent: true`,
        );
      }
      const capacity = algorithm.capacity(policy.params);
      if (rejectOversized && cost > capacity) throw costExceeds(cost, capacity, policy);
      return {
        key: bucketKey(policy, d),
        algorithm,
        params: policy.params,
        cost,
        enforce: !policy.shadow,
      };
    });
    return this.#run(nowMs, selected, batch, options);
  }

  /**
   * Runs a built batch through the store. A store with `applySync` (in-process) is
   * called directly: it cannot be waited on, so no deadline, timer or promise is made.
   */
  #run(
    nowMs: number,
    selected: readonly Policy[],
    batch: readonly StoreRequest[],
    options: DecideOptions,
  ): CheckResult | Promise<CheckResult> {
    if (batch.length === 0) return combineDecisions([]);
    const requestId =
      options.requestId === undefined ? undefined : validateRequestId(options.requestId);
    validateTimeout(options.timeoutMs);
    const m = this.#metrics;
    if (m !== undefined) {
      for (let i = 0; i < batch.length; i++) {
        m.bucket(selected[i]!.name, batch[i]!.key, batch[i]!.cost, nowMs);
      }
    }
    const independent = options.independent === true;
    const store = this.#store;
    if (store.applySync !== undefined) {
      let results: readonly StoreResult[];
      try {
        results = store.applySync(batch, {
          nowMs,
          ...(requestId === undefined ? {} : { requestId }),
          ...(independent ? { independent } : {}),
        });
      } catch (cause) {
        const error = asStoreError(cause);
        results = batch.map(() => ({ ok: false as const, error }));
      }
      // In-process calls are not timed (they are the check); their failures are counted.
      if (m !== undefined) {
        const failed = results.find((r) => !r.ok);
        if (failed !== undefined) m.storeCall(0, failed.error);
      }
      return this.#finish(selected, batch, results, nowMs, independent);
    }
    let policyMs = MAX_TIMER_MS;
    for (const p of selected) policyMs = Math.min(policyMs, p.timeoutMs);
    const callerMs = options.timeoutMs ?? Infinity;
    const timeoutMs = Math.min(policyMs, callerMs);
    const endedBy = callerMs < policyMs ? 'deadline' : 'store';
    return this.#apply(
      selected,
      batch,
      nowMs,
      timeoutMs,
      requestId,
      independent,
      endedBy,
      options.signal,
    );
  }

  /** Turns the store's per-item results into the check's result. */
  #finish(
    selected: readonly Policy[],
    batch: readonly StoreRequest[],
    results: readonly StoreResult[],
    nowMs: number,
    independent: boolean,
  ): CheckResult {
    // A batch is atomic: if any item failed, nothing is known about the others. Items
    // decided independently fail alone.
    if (!independent) {
      for (let i = 0; i < results.length; i++) {
        if (!results[i]!.ok) return this.#failed(selected, batch, nowMs);
      }
    }
    const decisions: Decision[] = [];
    for (let i = 0; i < selected.length; i++) {
      const policy = selected[i]!;
      const result = results[i]!;
      if (!result.ok) {
        const d = this.#withoutStore(policy, batch[i]!, nowMs);
        if (d.path === 'stale' && d.allowed)
          this.#stale.spend(batch[i]!.key, policy, batch[i]!.cost, nowMs);
        decisions.push(d);
        continue;
      }
      let decision = result.decision;
      // INVALID_POLICY from a transition: the cost is above capacity (decideAt lets such
      // costs through), so it can never fit.
      if (decision.status === 'INVALID_POLICY') decision = neverFits(decision);
      if (policy.failureMode === 'stale') this.#stale.record(batch[i]!.key, decision, nowMs);
      decisions.push(withPolicy(decision, policy.name, policy.shadow ? 'shadow' : 'store'));
    }
    return combineDecisions(decisions);
  }

  /**
   * Runs the batch with a deadline and finishes it into the check's result; a late, thrown
   * or failed answer becomes per-item errors. One promise per check: no timer of its own
   * (see {@link Deadlines}) and no race.
   */
  #apply(
    selected: readonly Policy[],
    batch: readonly StoreRequest[],
    nowMs: number,
    timeoutMs: number,
    requestId: string | undefined,
    independent: boolean,
    /** What the deadline stands for: the policies' timeout, or the caller's shorter one. */
    deadlineEnds: 'store' | 'deadline',
    signal: AbortSignal | undefined,
  ): Promise<CheckResult> {
    const metrics = this.#metrics;
    const startedAt = metrics === undefined ? 0 : performance.now();
    return new Promise<CheckResult>((resolve, reject) => {
      const call = new StoreCall(nowMs, requestId, independent);
      let deadline: Deadline | undefined;
      let done = false;
      const finish = (results: readonly StoreResult[], endedBy: StoreCallEnd = 'store'): void => {
        if (done) return;
        done = true;
        deadline?.clear();
        signal?.removeEventListener('abort', onAbort);
        const observer = this.#observer;
        if (observer !== undefined || metrics !== undefined) {
          const failed = results.find((r) => !r.ok);
          if (failed === undefined) observer?.answered();
          else observer?.failed(failed.error, endedBy);
          metrics?.storeCall(performance.now() - startedAt, failed?.error, endedBy);
        }
        try {
          resolve(this.#finish(selected, batch, results, nowMs, independent));
        } catch (error) {
          reject(error as Error);
        }
      };
      const fail = (cause: unknown, endedBy: StoreCallEnd = 'store'): void => {
        const error = asStoreError(cause);
        finish(
          batch.map(() => ({ ok: false as const, error })),
          endedBy,
        );
      };
      const onAbort = (): void => {
        call.abort();
        fail(
          new StoreError(
            'SLUICE_ERR_STORE_TIMEOUT',
            'the caller cancelled the check before the store answered; the request may or may not have been applied',
          ),
          'cancel',
        );
      };
      if (signal !== undefined) {
        if (signal.aborted) {
          onAbort();
          return;
        }
        signal.addEventListener('abort', onAbort, { once: true });
      }
      if (Number.isFinite(timeoutMs)) {
        deadline = this.#deadlines.add(timeoutMs, () => {
          call.abort();
          fail(
            new StoreError(
              'SLUICE_ERR_STORE_TIMEOUT',
              deadlineEnds === 'deadline'
                ? `store did not answer within the caller's ${timeoutMs}ms; the request may or may not have been applied`
                : `store did not answer within ${timeoutMs}ms; the request may or may not have been applied`,
            ),
            deadlineEnds,
          );
        });
      }
      try {
        this.#store.apply(batch, call).then((results) => finish(results), fail);
      } catch (cause) {
        fail(cause);
      }
    });
  }

  /**
   * Decides without the store: each policy's failure mode, all-or-nothing like a store
   * batch (stale budgets are spent only when the request is admitted as a whole).
   */
  #failed(selected: readonly Policy[], batch: readonly StoreRequest[], nowMs: number): CheckResult {
    const decisions = selected.map((policy, i) => this.#withoutStore(policy, batch[i]!, nowMs));
    const result = combineDecisions(decisions);
    if (result.allowed) {
      selected.forEach((policy, i) => {
        if (decisions[i]!.path === 'stale' && decisions[i]!.allowed) {
          this.#stale.spend(batch[i]!.key, policy, batch[i]!.cost, nowMs);
        }
      });
    }
    return result;
  }

  /** One policy's decision without the store: its stale budget, else its failure mode. */
  #withoutStore(policy: Policy, r: StoreRequest, nowMs: number): Decision {
    if (policy.failureMode === 'stale') {
      const d = this.#stale.peek(r.key, policy, r.cost, nowMs);
      if (d !== undefined)
        return { ...d, policy: policy.name, path: policy.shadow ? 'shadow' : 'stale' };
    }
    return failureDecision(policy, r);
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

/**
 * The options of one store call. The abort signal is made only if the store reads it
 * (most calls never wait on anything abortable: an AbortController per check cost more
 * than the check); once the deadline has passed, a signal read later is already aborted.
 */
class StoreCall implements StoreApplyOptions {
  readonly nowMs: number;
  readonly requestId?: string;
  readonly independent?: boolean;
  #controller: AbortController | undefined;
  #aborted = false;

  constructor(nowMs: number, requestId: string | undefined, independent: boolean) {
    this.nowMs = nowMs;
    if (requestId !== undefined) this.requestId = requestId;
    if (independent) this.independent = true;
  }

  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#aborted) this.#controller.abort();
    return this.#controller.signal;
  }

  abort(): void {
    this.#aborted = true;
    this.#controller?.abort();
  }
}

/** The default of `options`: one shared object, not a new one per check. */
const NO_OPTIONS: CheckOptions = Object.freeze({});

/** `performance.timeOrigin` is a getter with argument checks: read it once. */
const TIME_ORIGIN = performance.timeOrigin;

/** A result or a promise of one as a promise; a throw becomes a rejection. */
function settled<T>(run: () => T | Promise<T>): Promise<T> {
  try {
    const result = run();
    return result instanceof Promise ? result : Promise.resolve(result);
  } catch (error) {
    return Promise.reject(error as Error);
  }
}

/** Runs one check and tells `m` how it ended and how long it took. */
function measured(
  m: CheckRecorder,
  run: () => CheckResult | Promise<CheckResult>,
): CheckResult | Promise<CheckResult> {
  const t0 = performance.now();
  let result: CheckResult | Promise<CheckResult>;
  try {
    result = run();
  } catch (error) {
    m.refused(error, performance.now() - t0);
    throw error;
  }
  if (!(result instanceof Promise)) {
    m.decided(result.status, result.decisions, performance.now() - t0);
    return result;
  }
  return result.then(
    (r) => {
      m.decided(r.status, r.decisions, performance.now() - t0);
      return r;
    },
    (error: unknown) => {
      m.refused(error, performance.now() - t0);
      throw error;
    },
  );
}

/** The longest delay a Node timer takes (2^31-1 ms, ~24.8 days); past it, it fires at 1ms. */
const MAX_TIMER_MS = 2_147_483_647;

function validateTimeout(timeoutMs: number | undefined): void {
  if (timeoutMs !== undefined && !(timeoutMs > 0)) {
    throw new PolicyError(
      'SLUICE_ERR_TIMEOUT_INVALID',
      `timeoutMs must be a positive number of ms, got ${String(timeoutMs)}`,
    );
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

function asStoreError(cause: unknown): StoreError {
  return cause instanceof StoreError
    ? cause
    : new StoreError(
        'SLUICE_ERR_STORE_UNAVAILABLE',
        `store failed: ${(cause as Error)?.message ?? String(cause)}`,
        { cause },
      );
}

function costExceeds(cost: number, capacity: number, policy: Policy): PolicyError {
  return new PolicyError(
    'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
    `cost ${cost} exceeds the capacity ${capacity} of policy "${policy.name}": it could never be admitted`,
  );
}

/** A decision for a cost that can never fit: over the limit, and no wait makes it fit. */
function neverFits(d: AlgorithmDecision): AlgorithmDecision {
  return { ...d, status: 'OVER_LIMIT', allowed: false, retryAfterMs: Infinity };
}

/** The cost rules of {@link costOf} over a record descriptor. */
function recordCost(policy: Policy, d: DescriptorRecord): number {
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

/** A store decision with the policy's name and the path it took (a plain literal: no spread). */
function withPolicy(d: AlgorithmDecision, policy: string, path: Decision['path']): Decision {
  return d.delayMs === undefined
    ? {
        status: d.status,
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        resetAfterMs: d.resetAfterMs,
        policy,
        path,
      }
    : {
        status: d.status,
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        resetAfterMs: d.resetAfterMs,
        delayMs: d.delayMs,
        policy,
        path,
      };
}

function validateRequestId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 128 || !id.isWellFormed()) {
    throw new PolicyError(
      'SLUICE_ERR_REQUEST_ID_INVALID',
      `requestId must be a non-empty, well-formed string of at most 128 characters, got ${typeof id === 'string' ? `${id.length} characters` : typeof id}`,
    );
  }
  return id;
}

function failureDecision(policy: Policy, request: StoreRequest): Decision {
  const limit = request.algorithm.capacity(request.params);
  const base = { limit, retryAfterMs: 0, resetAfterMs: 0, policy: policy.name };
  const mode =
    policy.failureMode === 'stale' ? (policy.stale?.fallback ?? 'closed') : policy.failureMode;
  if (policy.shadow || mode === 'open') {
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
