import { systemClock, type Clock } from '../core/clock.js';
import type { DescriptorInput } from '../core/descriptor.js';
import { descriptorLimits } from '../core/descriptor-limits.js';
import type { Policy } from '../core/policy.js';
import { parsePolicies, type PolicyInput, type PolicySet } from '../config/policies.js';
import type { CheckRecorder } from '../metrics/check-recorder.js';
import { LimiterMetrics } from '../metrics/limiter-metrics.js';
import type { Store } from '../stores/store.js';
import type { CheckResult } from './check-result.js';
import { NO_OPTIONS } from './check-input.js';
import { recorded } from './check-metrics.js';
import { CheckRun } from './check-run.js';
import { FailurePolicy } from './failure-policy.js';
import type { CheckOptions, LimiterOptions } from './limiter-options.js';
import { checkStages } from './pipeline.js';
import { PolicyPlans } from './plan.js';
import { QueryPlans, type PlanQuery } from './plan-query.js';
import {
  Reservations,
  type Reservation,
  type ReserveOptions,
  type SettleOptions,
  type SettleResult,
} from './reservations.js';
import { Resolver } from './resolve.js';
import { Settle } from './settle.js';
import type { Stage } from './stage.js';
import { StoreGateway } from './store-gateway.js';

export type { CheckOptions, DecisionListener, LimiterOptions } from './limiter-options.js';
export { PlanQuery, type PlanSpec } from './plan-query.js';
export type { StoreCallEnd, StoreCallObserver } from './store-gateway.js';
export type { Reservation, ReserveOptions, SettleOptions, SettleResult } from './reservations.js';

function toPolicySet(p: PolicySet | readonly PolicyInput[]): PolicySet {
  return Array.isArray(p) ? parsePolicies(p) : (p as PolicySet);
}

/**
 * Decides requests against policies through a store. A check is resolved once into
 * prepared items (one per matched policy: its compiled plan, bucket key or key-space
 * value, and cost); the items pass the limiter's stages in order, and those no stage
 * answered go to the store in one batch, all-or-nothing; see {@link Limiter.check}. A
 * rule set that matches requests itself (the envoy rules) checks a {@link PlanQuery}
 * through the same path.
 */
export class Limiter {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #resolver: Resolver;
  readonly #stages: readonly Stage[];
  /** The policies in force and their compiled resolution, swapped together. */
  #current: PolicyPlans;
  readonly #run: CheckRun;
  readonly #gateway: StoreGateway;
  readonly #metrics: CheckRecorder | undefined;
  readonly #reservations: Reservations;

  constructor(options: LimiterOptions) {
    this.#store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.#metrics =
      options.metrics ??
      (options.registry === undefined
        ? undefined
        : new LimiterMetrics({ registry: options.registry }));
    this.#gateway = new StoreGateway(this.#store, options.storeObserver, this.#metrics);
    // Stages come from outside (createLimiter in local/ adds the local ones).
    const stages = options.stages ?? [];
    checkStages(stages);
    this.#stages = Object.freeze([...stages]);
    this.#resolver = new Resolver(
      descriptorLimits(options),
      new QueryPlans(this.#store, this.#stages),
    );
    this.#run = new CheckRun(this.#gateway, new Settle(new FailurePolicy()), this.#metrics);
    this.#current = this.#accept(options.policies);
    this.#reservations = new Reservations({
      store: this.#store,
      gateway: this.#gateway,
      stages: this.#stages,
      policy: (name) => this.#current.policies.find((p) => p.name === name),
      checkAt: (nowMs, descriptor, o) => this.checkAt(nowMs, descriptor, o),
      nowMs: () => this.#nowMs(),
    });
  }

  #accept(policies: PolicySet | readonly PolicyInput[]): PolicyPlans {
    const set = toPolicySet(policies);
    for (const p of set.policies) this.#store.checkPolicy?.(p);
    this.#store.checkPolicies?.(set.policies);
    return new PolicyPlans(set.policies, this.#store, this.#stages);
  }

  /** The recorder the limiter reports to (`metrics`, or the one made in `registry`). */
  get metrics(): CheckRecorder | undefined {
    return this.#metrics;
  }

  /** The policies in force. */
  get policies(): readonly Policy[] {
    return this.#current.policies;
  }

  /** The pipeline's stages, in order (see {@link LimiterOptions.stages}). */
  get stages(): readonly Stage[] {
    return this.#stages;
  }

  /**
   * Replaces the policies atomically: a check in flight uses the old set or the new one,
   * never a mix. Invalid input throws and keeps the current set. Buckets of policies
   * that keep their name and key shape keep their state. The stages stay; which policies
   * each applies to is asked again for the new set.
   */
  setPolicies(policies: PolicySet | readonly PolicyInput[]): void {
    this.#current = this.#accept(policies);
  }

  /**
   * Closes the stages (each `Stage.close`, in order), so they give back what they hold.
   * The store is the caller's: close it separately, after this.
   */
  async close(): Promise<void> {
    for (const stage of this.#stages) await stage.close?.();
  }

  /** {@link Limiter.reserveAt} at the limiter clock's current time. */
  reserve(descriptor: DescriptorInput, options: ReserveOptions): Promise<Reservation> {
    return this.#reservations.reserveAt(this.#nowMs(), descriptor, options);
  }

  /**
   * Reserves `options.cost` units, an estimate, for a call whose cost is known only
   * afterwards (docs/costs.md): a check at that cost through the same pipeline, whose
   * answer can then be settled at the actual cost, once, by this process or another
   * ({@link Limiter.settle} with the reservation's `id`). A reservation never settled
   * stays charged at its estimate; after `ttlMs` it can no longer be settled. Rejects as
   * `checkAt` does, and with a `PolicyError` for a bad `ttlMs`
   * (`SLUICE_ERR_RESERVATION_INVALID`) or a store that cannot settle
   * (`SLUICE_ERR_RESERVE_UNSUPPORTED`). Policy files only: a {@link PlanQuery} is not reserved.
   */
  reserveAt(
    nowMs: number,
    descriptor: DescriptorInput,
    options: ReserveOptions,
  ): Promise<Reservation> {
    return this.#reservations.reserveAt(nowMs, descriptor, options);
  }

  /** {@link Limiter.settleAt} at the limiter clock's current time. */
  settle(id: string, actual: number, options?: SettleOptions): Promise<SettleResult> {
    return this.#reservations.settleAt(this.#nowMs(), id, actual, options);
  }

  /**
   * Settles reservation `id` (from {@link Limiter.reserve}, in any process with the same
   * policies and store) at `actual` units, at `nowMs`: below the estimate the difference
   * comes back, above it the excess is charged, down to the policy's `settle.maxDebt`
   * below empty. Once per id: a repeat, also after a timeout whose outcome was unknown,
   * applies nothing more (`applied` false). Rejects with a `PolicyError` for a bad id or
   * actual, or past the reservation's ttl (`SLUICE_ERR_RESERVATION_EXPIRED`), and with
   * the `StoreError` of a store that failed or was late (then settle again with the id).
   */
  settleAt(
    nowMs: number,
    id: string,
    actual: number,
    options?: SettleOptions,
  ): Promise<SettleResult> {
    return this.#reservations.settleAt(nowMs, id, actual, options);
  }

  /** {@link Limiter.checkAt} at the limiter clock's current time. */
  check(
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions = NO_OPTIONS,
  ): Promise<CheckResult> {
    return this.checkAt(this.#nowMs(), descriptor, options);
  }

  /**
   * Whether the store decides synchronously (its `apply` answers with the results, as
   * MemoryStore's does, not a promise), so {@link Limiter.checkSync} can be used. The
   * store is asked each time, with an empty batch (which changes nothing).
   */
  get synchronous(): boolean {
    return this.#gateway.synchronous;
  }

  /** {@link Limiter.checkSyncAt} at the limiter clock's current time. */
  checkSync(
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions = NO_OPTIONS,
  ): CheckResult {
    return this.checkSyncAt(this.#nowMs(), descriptor, options);
  }

  /**
   * {@link Limiter.checkAt} without a promise, for a store that decides in process
   * (MemoryStore; see {@link Limiter.synchronous}): the same decision, the same
   * all-or-nothing batch and failure modes, returned directly. Throws the `PolicyError`s
   * that `checkAt` rejects with, and a `TypeError` when a stage answers with a promise
   * (the error names the stage; the store is not asked) or the store does: the check was
   * then sent, goes on without a caller and its outcome is not known, so ask
   * {@link Limiter.synchronous} first when the store may be remote.
   */
  checkSyncAt(
    nowMs: number,
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions = NO_OPTIONS,
  ): CheckResult {
    const m = this.#metrics;
    const result =
      m === undefined
        ? this.#check(nowMs, descriptor, options, true)
        : this.#measured(m, nowMs, descriptor, options, true);
    if (result instanceof Promise) notSynchronous(result);
    return result;
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
   *
   * A {@link PlanQuery} is checked against its own specs' plans, counted as they say
   * (independently, as envoyproxy/ratelimit charges, or all-or-nothing); a cost above a
   * limit's capacity is then a decision: `OVER_LIMIT` with `retryAfterMs` Infinity.
   */
  checkAt(
    nowMs: number,
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions = NO_OPTIONS,
  ): Promise<CheckResult> {
    // Not async: on a synchronous store (MemoryStore) the result is ready at once, and
    // an already-resolved promise is all a check costs beyond the decision itself. (No
    // closure here: it would be one more object per check.)
    const m = this.#metrics;
    try {
      const result =
        m === undefined
          ? this.#check(nowMs, descriptor, options, false)
          : this.#measured(m, nowMs, descriptor, options, false);
      return result instanceof Promise ? result : Promise.resolve(result);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /**
   * {@link Limiter.#check}, told to `m` (a method, not a closure: a closure over the
   * arguments would cost every check a context object, metrics or not).
   */
  #measured(
    m: CheckRecorder,
    nowMs: number,
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions,
    sync: boolean,
  ): CheckResult | Promise<CheckResult> {
    const t0 = performance.now();
    let result: CheckResult | Promise<CheckResult>;
    try {
      result = this.#check(nowMs, descriptor, options, sync);
    } catch (error) {
      m.refused(error, performance.now() - t0);
      throw error;
    }
    return recorded(m, result, t0);
  }

  /** Resolves a check into prepared items and runs them (see {@link Limiter.checkAt}). */
  #check(
    nowMs: number,
    descriptor: DescriptorInput | PlanQuery,
    options: CheckOptions,
    sync: boolean,
  ): CheckResult | Promise<CheckResult> {
    // One read of the set in force: reloads never mix sets within a check.
    const items = this.#resolver.resolve(this.#current, descriptor, options);
    return this.#run.run(nowMs, items, options, sync);
  }
}

function ignore(): void {}

/**
 * Throws checkSync's error for a check the store answered with a promise (which goes on,
 * with nobody waiting for it). Apart, so checkSync stays small enough to be inlined.
 */
function notSynchronous(pending: Promise<CheckResult>): never {
  pending.then(undefined, ignore);
  throw new TypeError(`${NOT_SYNCHRONOUS} (the store answered this check with a promise)`);
}

const NOT_SYNCHRONOUS =
  'Limiter.checkSync needs a store that decides synchronously (such as MemoryStore); use check()';

/** `performance.timeOrigin` is a getter with argument checks: read it once. */
const TIME_ORIGIN = performance.timeOrigin;
