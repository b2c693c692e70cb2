import { systemClock, type Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import { StoreError } from '../core/errors.js';
import type { FailureMode } from '../core/policy.js';
import type { DecisionMode, EnvoyConfig, EnvoyRule } from '../config/envoy/envoy-config.js';
import { resolveDescriptorLimit, type ResolvedLimit } from '../config/envoy/limit-override.js';
import { hitsAddends } from '../config/envoy/hits-addend.js';
import { replacedMask } from '../config/envoy/replaces.js';
import { overallResult, type DescriptorOutcome } from '../config/envoy/overall.js';
import type { PolicySet } from '../config/policies.js';
import { PlanQuery, type StoreCallObserver } from '../limiter/limiter.js';
import type { RuleUsage } from '../metrics/rule-hits.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { UpstreamStats } from '../metrics/statsd/statsd-stats.js';
import type {
  NativeCheckRequest,
  NativeCheckResponse,
  RlsDescriptorStatus,
  RlsRequest,
  RlsResponse,
} from '../protocol/messages.js';
import type { QuotaAgent } from '../quota/agent.js';
import { hashTagOf, type DescriptorValues } from '../stores/key.js';
import type { Store } from '../stores/store.js';
import { callBudget } from './call-budget.js';
import type { DecisionObserver } from './decision-event.js';
import { rateLimitDynamicMetadata } from './dynamic-metadata.js';
import { descriptorStatus, outcomeOf } from './envoy-status.js';
import { EnvoyRulePolicies } from './envoy-rule-policies.js';
import { toNativeCheckResponse } from './grpc/check-response.js';
import type { CallContext } from './grpc/handlers.js';
import { rateLimitResponseHeaders, type ResponseHeaderNames } from './response-headers.js';
import { rlconfig } from './rlconfig.js';
import { ServiceLimiters } from './service-limiters.js';

export interface RateLimitServiceOptions {
  readonly store: Store;
  /** envoyproxy/ratelimit rules, answered on ShouldRateLimit and `/json`. */
  readonly envoyConfig: EnvoyConfig;
  /** Sluice-native policies, answered on `sluice.v1.Sluice/Check` and `/v1/check`. */
  readonly policies?: PolicySet;
  /** @default the system clock */
  readonly clock?: Clock;
  readonly metrics?: ServiceMetrics;
  /**
   * A second store for the rules whose unit is `second` (upstream's `REDIS_PERSECOND`).
   * A request with rules of both kinds is decided in both stores at once; under
   * all-or-nothing each store's part is atomic, the whole is not (a denial in one does
   * not undo what the other consumed). @default none: `store` serves every rule
   */
  readonly perSecondStore?: Store;
  /** Upstream's stats (statsd), told of every rule check, unknown domain and shadowed answer. */
  readonly stats?: UpstreamStats;
  /** Upstream's SHADOW_MODE: every overall answer is OK (descriptors still say). @default false */
  readonly globalShadowMode?: boolean;
  /** Upstream's QUOTA_MODE. @default false */
  readonly globalQuotaMode?: boolean;
  /** Failure mode of envoy rules without a `sluice.failure_mode`. @default "open" */
  readonly defaultFailureMode?: FailureMode;
  /** Store deadline for envoy rules, in ms. @default 10 */
  readonly timeoutMs?: number;
  /**
   * Upstream's `LIMIT_RESPONSE_HEADERS_ENABLED`: add limit / remaining / reset headers for
   * the descriptor closest to its limit to every answer. @default off
   */
  readonly responseHeaders?: ResponseHeaderNames;
  /** Upstream's `RESPONSE_DYNAMIC_METADATA`. @default false */
  readonly responseDynamicMetadata?: boolean;
  /** Bounds on native Check descriptors (the transports check them first too). @default DEFAULT_DESCRIPTOR_LIMITS */
  readonly descriptorLimits?: DescriptorLimits;
  /**
   * How a request's descriptors are charged where its domain's `sluice.decision` does not
   * say (see `DecisionMode`). @default "per-descriptor" (as envoyproxy/ratelimit counts)
   */
  readonly decisionMode?: DecisionMode;
  /** Told how each store call ended (see `StoreHealth`). @default none */
  readonly storeObserver?: StoreCallObserver;
  /**
   * Bytes of the over-limit cache (upstream's `LOCAL_CACHE_SIZE_IN_BYTES`); 0 is off.
   * @default 0
   */
  readonly localCacheSizeBytes?: number;
  /** Told about every policy decision (status page, decision log). @default none */
  readonly decisionObserver?: DecisionObserver;
  /**
   * Quota leases: the envoy rules and native policies named (by public name) are decided
   * by their agent's lease (`LeaseStage`, after the local stages), in both stores.
   * @default none
   */
  readonly leases?: {
    readonly policies: readonly string[];
    readonly agentFor: (policy: string) => QuotaAgent | undefined;
  };
}

/**
 * The one handler core behind every transport: envoy's ShouldRateLimit (gRPC and
 * `/json`) over envoyproxy/ratelimit rules, and Sluice's native Check over policies.
 * Both go through `Limiter.check`: a request's limited descriptors are one check of a
 * `PlanQuery` (the plans their rules compile to) per store, in one store call each,
 * counted per descriptor as upstream counts or, where the domain or the service asks for
 * it, all-or-nothing, so a request denied by one descriptor is charged nowhere.
 */
export class RateLimitService {
  readonly #limiters: ServiceLimiters;
  readonly #clock: Clock;
  readonly #metrics: ServiceMetrics | undefined;
  readonly #options: RateLimitServiceOptions;
  #config: EnvoyConfig;
  /** The plans envoy rules compile to. */
  readonly #rules: EnvoyRulePolicies;
  readonly #observer: DecisionObserver | undefined;

  constructor(options: RateLimitServiceOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#metrics = options.metrics;
    this.#config = options.envoyConfig;
    this.#observer = options.decisionObserver;
    this.#rules = new EnvoyRulePolicies(options);
    this.#rules.check(options.envoyConfig);
    this.#limiters = new ServiceLimiters({ ...options, clock: this.#clock }, this.#rules);
  }

  /**
   * Closes both limiters' stages: unspent batch units go back to the store they came from
   * (the main one, and the per-second one when there is one). Idempotent.
   */
  async close(): Promise<void> {
    await this.#limiters.close();
  }

  /** The envoy rules in force. */
  get envoyConfig(): EnvoyConfig {
    return this.#config;
  }

  /** Swaps rules and policies atomically: a request uses the old set or the new one. */
  reload(envoyConfig: EnvoyConfig, policies?: PolicySet): void {
    this.#rules.check(envoyConfig);
    if (policies !== undefined) this.#limiters.main.setPolicies(policies);
    this.#config = envoyConfig;
  }

  /**
   * envoy's ShouldRateLimit. `context` (the transport's) bounds the store call by the
   * caller's deadline and stops the wait when the caller cancels.
   */
  async shouldRateLimit(req: RlsRequest, context?: CallContext): Promise<RlsResponse> {
    const callOptions = callBudget(context);
    const config = this.#config; // one read: a reload never mixes rule sets
    const nowMs = this.#clock.nowMs();
    if (config.domains[req.domain] === undefined)
      this.#options.stats?.domainNotFound(req.domain, req.descriptors.length);
    const hits = hitsAddends(
      req.hitsAddend,
      req.descriptors.map((d) => d.hitsAddend),
    );
    const resolved = req.descriptors.map((d) =>
      resolveDescriptorLimit(
        config,
        req.domain,
        d.entries,
        d.limit && {
          requestsPerUnit: d.limit.requestsPerUnit,
          unit: d.limit.unit.toLowerCase() as NonNullable<EnvoyRule['unit']>,
        },
      ),
    );
    const replaced = replacedMask(resolved.map((r) => r?.rule));
    const limited = resolved.map((r, i) =>
      r !== undefined && !replaced[i] && !r.rule.unlimited && r.rule.sluice.params !== undefined
        ? r
        : undefined,
    );
    const globalShadowMode = this.#options.globalShadowMode ?? false;
    const globalQuotaMode = this.#options.globalQuotaMode ?? false;
    const options = { globalShadowMode, globalQuotaMode };
    // Per descriptor (upstream's counting): every limited descriptor is charged its hits
    // on its own counter, whatever the others answer, in one store call.
    const independent =
      (config.domains[req.domain]?.decision ?? this.#options.decisionMode ?? 'per-descriptor') ===
      'per-descriptor';
    const statuses: RlsDescriptorStatus[] = [];
    const usages: (RuleUsage | undefined)[] = [];
    const outcomes: DescriptorOutcome[] = [];
    const decisionOf: (Decision | undefined)[] = [];
    /** Per descriptor, the identity tag of its bucket (from the key the limiter built). */
    const tagOf: (string | undefined)[] = [];
    // All or nothing: a request denied whatever the store answers (a requests_per_unit 0
    // rule denies it even if every limited descriptor fits) is charged nowhere; its
    // descriptors are only read.
    const deniedAnyway =
      !independent &&
      overallResult(
        resolved.map((r, i) =>
          limited[i] === undefined
            ? outcomeOf(
                r,
                replaced[i]!,
                descriptorStatus(r, replaced[i]!, undefined, hits[i]!, 0, nowMs).status,
              )
            : {
                code: 'OK',
                unlimited: false,
                quotaMode: r!.rule.quotaMode,
                hasLimit: true,
                remaining: 1,
              },
        ),
        options,
      ).code === 'OVER_LIMIT';
    const perSecondStore = this.#limiters.perSecond !== undefined;
    // All or nothing: descriptors of quota-mode rules found over their limit. A request
    // that passes anyway (not every quota descriptor is over) is decided again without
    // them, so the check stays all-or-nothing over what the request is actually charged.
    const droppedQuota = new Set<number>();
    let overall: ReturnType<typeof overallResult>;
    for (;;) {
      // One query per store; `from*[j]`: the descriptor of a query's j-th limit.
      const main = new PlanQuery();
      const fast = new PlanQuery();
      const fromMain: number[] = [];
      const fromFast: number[] = [];
      limited.forEach((r, i) => {
        if (r === undefined || droppedQuota.has(i)) return;
        const second = perSecondStore && r.rule.unit === 'second';
        (second ? fromFast : fromMain).push(i);
        (second ? fast : main).add(this.#rules.specFor(r, independent), bucketValues(r), hits[i]!);
      });
      const passDecisions: (Decision | undefined)[] = [];
      const tell =
        (from: readonly number[]) =>
        (d: Decision, key: string, j: number): void => {
          passDecisions[from[j]!] = d;
          if (this.#observer !== undefined) tagOf[from[j]!] = hashTagOf(key);
        };
      const results = await this.#limiters.check(
        main,
        fast,
        { ...callOptions(), ...(deniedAnyway ? { cost: 0 } : {}) },
        tell(fromMain),
        tell(fromFast),
      );
      const allowed = results.every((r) => r === undefined || r.allowed);
      if (passDecisions.some((d) => d?.status === 'UNAVAILABLE')) {
        passDecisions.forEach((d, i) => {
          if (d !== undefined) this.#observe(d, tagOf[i]!, context);
        });
        // envoy has no "could not decide" code: answer the call with an error, as upstream
        // does when Redis fails, so envoy's own failure_mode_deny applies.
        throw new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'rate limit store unavailable');
      }
      req.descriptors.forEach((_, i) => {
        if (droppedQuota.has(i)) return; // keeps its over-limit answer from the pass that dropped it
        const r = resolved[i];
        const decision = passDecisions[i];
        decisionOf[i] = decision;
        // What this pass took from the descriptor's counter, for the hit statistics.
        const taken =
          decision !== undefined && decision.allowed && (independent || allowed)
            ? deniedAnyway
              ? 0
              : hits[i]!
            : 0;
        const { status, usage } = descriptorStatus(
          r,
          replaced[i]!,
          decision,
          hits[i]!,
          taken,
          nowMs,
        );
        statuses[i] = status;
        usages[i] = usage;
        outcomes[i] = outcomeOf(r, replaced[i]!, status);
      });
      overall = overallResult(outcomes, options);
      const passes = overall.code === 'OK' && !overall.globalShadowApplied;
      const newlyOver = outcomes.flatMap((o, i) =>
        !droppedQuota.has(i) &&
        passDecisions[i] !== undefined &&
        o.code === 'OVER_LIMIT' &&
        (globalQuotaMode || o.quotaMode)
          ? [i]
          : [],
      );
      if (independent || allowed || !passes || newlyOver.length === 0) break;
      for (const i of newlyOver) droppedQuota.add(i);
    }
    usages.forEach((usage, i) => {
      const r = resolved[i];
      if (usage === undefined || r === undefined) return;
      this.#metrics?.recordRuleCheck(req.domain, r.statsKey, usage);
      this.#options.stats?.ruleCheck(r.statsKey, usage);
    });
    if (overall.globalShadowApplied) this.#options.stats?.globalShadowMode();
    // Decisions go by the rules' public names (their plans' names).
    decisionOf.forEach((d, i) => {
      if (d !== undefined) this.#observe(d, tagOf[i]!, context);
    });
    const names = this.#options.responseHeaders;
    const headers =
      names === undefined || overall.headerIndex === undefined
        ? []
        : rateLimitResponseHeaders(names, statuses[overall.headerIndex]!);
    return {
      overallCode: overall.code,
      statuses,
      ...(headers.length === 0 ? {} : { responseHeadersToAdd: headers }),
      ...(this.#options.responseDynamicMetadata === true
        ? {
            dynamicMetadata: rateLimitDynamicMetadata(
              req,
              resolved.map((r, i) => (replaced[i] ? undefined : r?.rule)),
              outcomes.map((o) => !o.unlimited && o.code !== 'OVER_LIMIT'),
            ),
          }
        : {}),
    };
  }

  /** Sluice's native Check; `context` as for {@link RateLimitService.shouldRateLimit}. */
  async check(req: NativeCheckRequest, context?: CallContext): Promise<NativeCheckResponse> {
    const observed: { d: Decision; tag: string }[] = [];
    const result = await this.#limiters.main.check(req.entries, {
      ...callBudget(context)(),
      ...(req.cost === undefined ? {} : { cost: req.cost }),
      ...(req.requestId === undefined ? {} : { requestId: req.requestId }),
      ...(req.policies === undefined ? {} : { policies: req.policies }),
      ...(this.#observer === undefined
        ? {}
        : { onDecision: (d: Decision, key: string) => observed.push({ d, tag: hashTagOf(key) }) }),
    });
    const requestId = req.requestId ?? context?.requestId;
    for (const { d, tag } of observed) this.#observe(d, tag, undefined, requestId);
    return toNativeCheckResponse(result);
  }

  /** Tells the decision observer, if any, of one decision and its bucket's identity tag. */
  #observe(
    decision: Decision,
    identityTag: string,
    context: CallContext | undefined,
    requestId: string | undefined = context?.requestId,
  ): void {
    if (this.#observer === undefined) return;
    this.#observer({
      decision,
      identityTag,
      ...(requestId === undefined ? {} : { requestId }),
    });
  }

  /** Upstream's `/rlconfig` dump: one line per rule. */
  rlconfig(): string {
    return rlconfig(this.#config);
  }
}

/** Positional values (e0, e1, ...): envoy descriptors may repeat a key; paths are unique per policy. */
function bucketValues(r: ResolvedLimit): DescriptorValues {
  const values: Record<string, string> = {};
  r.bucketValues.forEach((value, i) => (values[`e${i}`] = value));
  return values;
}
