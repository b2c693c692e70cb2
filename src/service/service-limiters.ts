import type { Clock } from '../core/clock.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import type { PolicySet } from '../config/policies.js';
import type { CheckResult } from '../limiter/check-result.js';
import {
  PlanQuery,
  type CheckOptions,
  type Limiter,
  type StoreCallObserver,
} from '../limiter/limiter.js';
import type { Stage } from '../limiter/stage.js';
import { createLimiter } from '../local/create-limiter.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { QuotaAgent } from '../quota/agent.js';
import { LeaseStage } from '../quota/lease-stage.js';
import type { Store } from '../stores/store.js';
import type { EnvoyRulePolicies } from './envoy-rule-policies.js';

/** What {@link ServiceLimiters} are made from (the service's options, by their names there). */
export interface ServiceLimitersOptions {
  readonly store: Store;
  readonly perSecondStore?: Store | undefined;
  readonly policies?: PolicySet | undefined;
  readonly clock: Clock;
  readonly metrics?: ServiceMetrics | undefined;
  readonly descriptorLimits?: DescriptorLimits | undefined;
  readonly storeObserver?: StoreCallObserver | undefined;
  readonly localCacheSizeBytes?: number | undefined;
  readonly leases?:
    | {
        readonly policies: readonly string[];
        readonly agentFor: (policy: string) => QuotaAgent | undefined;
      }
    | undefined;
}

/**
 * The service's limiters: one on the main store (native policies and envoy rules), and
 * one on the per-second store when there is one (upstream's `REDIS_PERSECOND`, for the
 * rules whose unit is `second`). Both are made by one `createLimiter` call, with its
 * default stages (and the lease stage after them, with leases), and checked through
 * `check` like any library user's.
 */
export class ServiceLimiters {
  readonly main: Limiter;
  readonly perSecond: Limiter | undefined;

  constructor(options: ServiceLimitersOptions, rules: EnvoyRulePolicies) {
    this.main = limiterOn(options.store, options, rules, true);
    this.perSecond =
      options.perSecondStore === undefined
        ? undefined
        : limiterOn(options.perSecondStore, options, rules, false);
  }

  /**
   * Checks `main` on the main limiter and `fast` on the per-second one, both at once
   * (`fast` is empty without a per-second store); `onMain` and `onFast` are told each
   * decision with its bucket key.
   */
  async check(
    main: PlanQuery,
    fast: PlanQuery,
    options: Omit<CheckOptions, 'onDecision'>,
    onMain: CheckOptions['onDecision'],
    onFast: CheckOptions['onDecision'],
  ): Promise<readonly [CheckResult | undefined, CheckResult | undefined]> {
    const second = this.perSecond;
    const withListener = (listener: CheckOptions['onDecision']): CheckOptions =>
      listener === undefined ? options : { ...options, onDecision: listener };
    return Promise.all([
      main.size === 0 ? undefined : this.main.check(main, withListener(onMain)),
      fast.size === 0 || second === undefined
        ? undefined
        : second.check(fast, withListener(onFast)),
    ]);
  }

  /** Closes both limiters' stages: unspent batch units go back to their store. */
  async close(): Promise<void> {
    await Promise.all([this.main.close(), this.perSecond?.close()]);
  }
}

function limiterOn(
  store: Store,
  options: ServiceLimitersOptions,
  rules: EnvoyRulePolicies,
  withPolicies: boolean,
): Limiter {
  const metrics = options.metrics;
  return createLimiter({
    store,
    policies: (withPolicies ? options.policies : undefined) ?? [],
    clock: options.clock,
    ...options.descriptorLimits,
    ...(options.storeObserver === undefined || !withPolicies
      ? {}
      : { storeObserver: options.storeObserver }),
    overLimitCacheBytes: options.localCacheSizeBytes ?? 0,
    // With leases, the lease stage after createLimiter's own (local) stages.
    ...(options.leases === undefined ? {} : { moreStages: [leaseStage(options, rules)] }),
    // Every decision, store call and bucket is counted by the limiter, under the plans'
    // names (an envoy rule's public name).
    ...(metrics === undefined ? {} : { metrics: metrics.limiter, stageMetrics: metrics.stages }),
  });
}

/** The lease stage: the rules and policies named in `leases`, by their public names. */
function leaseStage(options: ServiceLimitersOptions, rules: EnvoyRulePolicies): Stage {
  const leases = options.leases!;
  const stageMetrics = options.metrics?.stages;
  return new LeaseStage({
    policies: leases.policies,
    // A descriptor's own limit (an override) takes no lease.
    agentFor: (item) =>
      rules.isOverride(item.policy) ? undefined : leases.agentFor(item.name ?? item.policy.name),
    ...(stageMetrics === undefined ? {} : { metrics: stageMetrics }),
  });
}
