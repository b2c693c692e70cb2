import { systemClock, type Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import type { Descriptor } from '../core/descriptor.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import { StoreError } from '../core/errors.js';
import type { FailureMode, Policy } from '../core/policy.js';
import {
  publicRuleName,
  type DecisionMode,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
  type EnvoyRule,
} from '../config/envoy/envoy-config.js';
import { resolveDescriptorLimit, type ResolvedLimit } from '../config/envoy/limit-override.js';
import { hitsAddends } from '../config/envoy/hits-addend.js';
import { replacedMask } from '../config/envoy/replaces.js';
import {
  UNLIMITED_REMAINING,
  descriptorCode,
  overallResult,
  type DescriptorOutcome,
} from '../config/envoy/overall.js';
import { durationUntilResetSeconds } from '../config/envoy/window.js';
import type { PolicySet } from '../config/policies.js';
import {
  type CheckItem,
  type DecideOptions,
  type Limiter,
  type StoreCallObserver,
} from '../limiter/limiter.js';
import { createLimiter } from '../local/create-limiter.js';
import { combineDecisions, type CheckResult } from '../limiter/check-result.js';
import type { RuleUsage } from '../metrics/rule-hits.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import { bucketKey, hashTagOf } from '../stores/key.js';
import type { UpstreamStats } from '../metrics/statsd/statsd-stats.js';
import type { Store } from '../stores/store.js';
import type { Stage } from '../limiter/stage.js';
import { localStages } from '../local/stages.js';
import type { QuotaAgent } from '../quota/agent.js';
import { LeaseStage } from '../quota/lease-stage.js';
import type { DecisionObserver } from './decision-event.js';
import { rateLimitDynamicMetadata } from './dynamic-metadata.js';
import { EnvoyRulePolicies } from './envoy-rule-policies.js';
import { toNativeCheckResponse } from './grpc/check-response.js';
import type {
  NativeCheckRequest,
  NativeCheckResponse,
  RlsDescriptorStatus,
  RlsRequest,
  RlsResponse,
  RlsUnit,
} from '../protocol/messages.js';
import type { CallContext } from './grpc/handlers.js';
import { rateLimitResponseHeaders, type ResponseHeaderNames } from './response-headers.js';

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
 * A request's limited descriptors go to the limiter in one store call (deadlines,
 * failure modes), decided per descriptor as upstream counts, or, where the domain or the
 * service asks for it, as one all-or-nothing batch, so a request denied by one
 * descriptor is charged nowhere.
 */
export class RateLimitService {
  readonly #limiter: Limiter;
  readonly #perSecondLimiter: Limiter | undefined;
  readonly #clock: Clock;
  readonly #metrics: ServiceMetrics | undefined;
  readonly #options: RateLimitServiceOptions;
  #config: EnvoyConfig;
  /** The policies envoy rules compile to. */
  readonly #rules: EnvoyRulePolicies;
  readonly #observer: DecisionObserver | undefined;
  /** Native policies by name, to find the identity a decision was charged to. */
  #nativePolicies: ReadonlyMap<string, Policy>;

  constructor(options: RateLimitServiceOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#metrics = options.metrics;
    this.#config = options.envoyConfig;
    this.#observer = options.decisionObserver;
    this.#nativePolicies = byName(options.policies);
    this.#rules = new EnvoyRulePolicies(options);
    this.#rules.check(options.envoyConfig);
    const stageMetrics = options.metrics?.stages;
    const leases = options.leases;
    const publicName = (name: string): string => this.#rules.publicName(name);
    // With leases, the limiter's default stages (`localStages`) and the lease stage last.
    const stages = (store: Store, overLimitCacheBytes: number): { stages?: Stage[] } =>
      leases === undefined
        ? {}
        : {
            stages: [
              ...localStages({
                clock: this.#clock,
                overLimitCacheBytes,
                ...(stageMetrics === undefined ? {} : { metrics: stageMetrics }),
              }),
              new LeaseStage({
                policies: leases.policies,
                nameOf: (p) => publicName(p.name),
                agentFor: (item) => leases.agentFor(publicName(item.policy.name)),
                ...(stageMetrics === undefined ? {} : { metrics: stageMetrics }),
              }),
            ],
          };
    this.#limiter = createLimiter({
      store: options.store,
      policies: options.policies ?? [],
      clock: this.#clock,
      ...options.descriptorLimits,
      ...(options.storeObserver === undefined ? {} : { storeObserver: options.storeObserver }),
      overLimitCacheBytes: options.localCacheSizeBytes ?? 0,
      ...stages(options.store, options.localCacheSizeBytes ?? 0),
      // Every decision, store call and bucket is counted by the limiter, under the rules'
      // public names (see #buildPolicy).
      ...(options.metrics === undefined
        ? {}
        : { metrics: options.metrics.limiter, stageMetrics: options.metrics.stages }),
    });
    this.#perSecondLimiter =
      options.perSecondStore === undefined
        ? undefined
        : createLimiter({
            store: options.perSecondStore,
            policies: [],
            clock: this.#clock,
            ...options.descriptorLimits,
            // The same stages as the main limiter's, over-limit cache included.
            overLimitCacheBytes: options.localCacheSizeBytes ?? 0,
            ...stages(options.perSecondStore, options.localCacheSizeBytes ?? 0),
            ...(options.metrics === undefined
              ? {}
              : { metrics: options.metrics.limiter, stageMetrics: options.metrics.stages }),
          });
  }

  /**
   * Decides `items` in the store each belongs to: those marked in `perSecond` in the
   * per-second store (when there is one), the rest in the main one, both at once; the
   * decisions come back in item order.
   */
  async #decideAt(
    nowMs: number,
    items: readonly CheckItem[],
    perSecond: readonly boolean[],
    options: DecideOptions,
  ): Promise<CheckResult> {
    const second = this.#perSecondLimiter;
    if (second === undefined || !perSecond.includes(true))
      return this.#limiter.decideAt(nowMs, items, options);
    if (!perSecond.includes(false)) return second.decideAt(nowMs, items, options);
    const [main, fast] = await Promise.all([
      this.#limiter.decideAt(
        nowMs,
        items.filter((_, i) => !perSecond[i]),
        options,
      ),
      second.decideAt(
        nowMs,
        items.filter((_, i) => perSecond[i]),
        options,
      ),
    ]);
    const from = { main: 0, fast: 0 };
    return combineDecisions(
      perSecond.map((s) => (s ? fast.decisions[from.fast++]! : main.decisions[from.main++]!)),
    );
  }

  /**
   * Closes both limiters' stages: unspent batch units go back to the store they came from
   * (the main one, and the per-second one when there is one). Idempotent.
   */
  async close(): Promise<void> {
    await Promise.all([this.#limiter.close(), this.#perSecondLimiter?.close()]);
  }

  /** The envoy rules in force. */
  get envoyConfig(): EnvoyConfig {
    return this.#config;
  }

  /** Swaps rules and policies atomically: a request uses the old set or the new one. */
  reload(envoyConfig: EnvoyConfig, policies?: PolicySet): void {
    this.#rules.check(envoyConfig);
    if (policies !== undefined) {
      this.#limiter.setPolicies(policies);
      this.#nativePolicies = byName(policies);
    }
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
    const outcomeOf = (i: number, status: RlsDescriptorStatus): DescriptorOutcome => ({
      code: status.code,
      unlimited: resolved[i]?.rule.unlimited === true && !replaced[i],
      quotaMode: resolved[i]?.rule.quotaMode === true,
      hasLimit: status.currentLimit !== undefined,
      remaining: status.limitRemaining,
    });
    // All or nothing: a request denied whatever the store answers (a requests_per_unit 0
    // rule denies it even if every limited descriptor fits) is charged nowhere; its
    // descriptors are only read.
    const deniedAnyway =
      !independent &&
      overallResult(
        resolved.map((r, i) =>
          limited[i] === undefined
            ? outcomeOf(i, this.#status(r, replaced[i]!, undefined, hits[i]!, 0, nowMs).status)
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
    // All or nothing: descriptors of quota-mode rules found over their limit. A request
    // that passes anyway (not every quota descriptor is over) is decided again without
    // them, so the batch stays all-or-nothing over what the request is actually charged.
    const droppedQuota = new Set<number>();
    let overall: ReturnType<typeof overallResult>;
    for (;;) {
      const items: CheckItem[] = [];
      const perSecond: boolean[] = [];
      const itemOf = limited.map((r, i) => {
        if (r === undefined || droppedQuota.has(i)) return undefined;
        perSecond.push(r.rule.unit === 'second');
        items.push({
          policy: this.#rules.policyFor(r, independent),
          descriptor: bucketDescriptor(r),
          cost: deniedAnyway ? 0 : hits[i]!,
        });
        return items.length - 1;
      });
      const result = await this.#decideAt(nowMs, items, perSecond, {
        ...callOptions(),
        independent,
      });
      if (result.decisions.some((d) => d.status === 'UNAVAILABLE')) {
        itemOf.forEach((idx, i) => {
          if (idx !== undefined) {
            // The limiter counted the decision; the decision log wants the rule's name too.
            const named = { ...result.decisions[idx]!, policy: ruleName(resolved[i]!) };
            this.#observeRule(named, items[idx]!, context);
          }
        });
        // envoy has no "could not decide" code: answer the call with an error, as upstream
        // does when Redis fails, so envoy's own failure_mode_deny applies.
        throw new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'rate limit store unavailable');
      }
      req.descriptors.forEach((_, i) => {
        if (droppedQuota.has(i)) return; // keeps its over-limit answer from the pass that dropped it
        const r = resolved[i];
        const idx = itemOf[i];
        const decision = idx === undefined ? undefined : result.decisions[idx];
        decisionOf[i] = decision;
        // What this pass took from the descriptor's counter, for the hit statistics.
        const taken =
          decision !== undefined && decision.allowed && (independent || result.allowed)
            ? items[idx!]!.cost
            : 0;
        const { status, usage } = this.#status(r, replaced[i]!, decision, hits[i]!, taken, nowMs);
        statuses[i] = status;
        usages[i] = usage;
        outcomes[i] = outcomeOf(i, status);
      });
      overall = overallResult(outcomes, options);
      const passes = overall.code === 'OK' && !overall.globalShadowApplied;
      const newlyOver = outcomes.flatMap((o, i) =>
        !droppedQuota.has(i) &&
        itemOf[i] !== undefined &&
        o.code === 'OVER_LIMIT' &&
        (globalQuotaMode || o.quotaMode)
          ? [i]
          : [],
      );
      if (independent || result.allowed || !passes || newlyOver.length === 0) break;
      for (const i of newlyOver) droppedQuota.add(i);
    }
    usages.forEach((usage, i) => {
      const r = resolved[i];
      if (usage === undefined || r === undefined) return;
      this.#metrics?.recordRuleCheck(req.domain, r.statsKey, usage);
      this.#options.stats?.ruleCheck(r.statsKey, usage);
    });
    if (overall.globalShadowApplied) this.#options.stats?.globalShadowMode();
    decisionOf.forEach((d, i) => {
      if (d === undefined) return;
      if (this.#observer !== undefined) {
        // Under the rule's public name, never its policy's internal (storage) name.
        const named = { ...d, policy: ruleName(resolved[i]!) };
        const r = resolved[i]!;
        this.#observeRule(
          named,
          {
            policy: this.#rules.policyFor(r, independent),
            descriptor: bucketDescriptor(r),
            cost: 0,
          },
          context,
        );
      }
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
    const result = await this.#limiter.check(req.entries, {
      ...callBudget(context)(),
      ...(req.cost === undefined ? {} : { cost: req.cost }),
      ...(req.requestId === undefined ? {} : { requestId: req.requestId }),
      ...(req.policies === undefined ? {} : { policies: req.policies }),
    });
    const requestId = req.requestId ?? context?.requestId;
    for (const d of result.decisions) {
      const policy = this.#observer === undefined ? undefined : this.#nativePolicies.get(d.policy);
      if (policy !== undefined) {
        this.#observer!({
          decision: d,
          identityTag: hashTagOf(bucketKey(policy, req.entries)),
          ...(requestId === undefined ? {} : { requestId }),
        });
      }
    }
    return toNativeCheckResponse(result);
  }

  #observeRule(decision: Decision, item: CheckItem, context: CallContext | undefined): void {
    if (this.#observer === undefined) return;
    const requestId = context?.requestId;
    this.#observer({
      decision,
      identityTag: hashTagOf(bucketKey(item.policy, item.descriptor)),
      ...(requestId === undefined ? {} : { requestId }),
    });
  }

  /** Upstream's `/rlconfig` dump: one line per rule. */
  rlconfig(): string {
    const lines: string[] = [];
    const walk = (level: EnvoyDescriptorLevel): void => {
      for (const node of Object.values(level.nodes)) {
        const rule = node.rule;
        if (rule !== undefined) {
          const limit = rule.unlimited
            ? 'unlimited'
            : `unit=${(rule.unit ?? '').toUpperCase()} requests_per_unit=${rule.requestsPerUnit}`;
          lines.push(
            `${rule.fullKey}: ${limit}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}`,
          );
        }
        walk(node.children);
      }
    };
    for (const d of Object.values(this.#config.domains)) walk(d.descriptors);
    return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  }

  /**
   * A descriptor's answer, and its usage for the hit statistics: `hits` is what the request
   * asked for, `taken` what the decision took from the counter.
   */
  #status(
    r: ResolvedLimit | undefined,
    replaced: boolean,
    decision: Decision | undefined,
    hits: number,
    taken: number,
    nowMs: number,
  ): { status: RlsDescriptorStatus; usage?: RuleUsage } {
    if (r === undefined || replaced) return { status: { code: 'OK', limitRemaining: 0 } };
    const rule = r.rule;
    if (rule.unlimited) return { status: { code: 'OK', limitRemaining: UNLIMITED_REMAINING } };
    const currentLimit = {
      ...(rule.name === '' ? {} : { name: rule.name }),
      requestsPerUnit: rule.requestsPerUnit,
      unit: (rule.unit ?? 'second').toUpperCase() as RlsUnit,
    };
    // Upstream reports whole seconds to the end of the epoch-aligned window.
    const resetMs =
      rule.sluice.algorithm === 'fixed-window' || decision === undefined
        ? durationUntilResetSeconds(rule.unit!, nowMs) * 1_000
        : decision.resetAfterMs;
    if (decision === undefined) {
      // requests_per_unit 0: upstream's "deny everything"
      return {
        status: {
          code: descriptorCode(true, rule.shadowMode),
          currentLimit,
          limitRemaining: 0,
          durationUntilResetMs: resetMs,
        },
        usage: { limit: 0, usedBefore: 0, hits, shadow: rule.shadowMode },
      };
    }
    // Upstream reports 0 left for a descriptor over its limit, whatever the counter holds.
    const remaining =
      decision.status === 'OVER_LIMIT' ? 0 : Math.max(0, Math.floor(decision.remaining + 1e-9));
    // A denial reports the capacity it found: the counter before this request.
    const usedBefore = decision.limit - decision.remaining - taken;
    return {
      status: {
        code: descriptorCode(decision.status === 'OVER_LIMIT', rule.shadowMode),
        currentLimit,
        limitRemaining: remaining,
        durationUntilResetMs: resetMs,
      },
      usage: {
        limit: decision.limit,
        usedBefore: Math.max(0, usedBefore),
        hits,
        shadow: rule.shadowMode,
      },
    };
  }
}

function byName(set: PolicySet | undefined): ReadonlyMap<string, Policy> {
  return new Map((set?.policies ?? []).map((p) => [p.name, p]));
}

/**
 * The name a descriptor's rule goes by in Sluice's metrics and messages: the rule's
 * public name (`sluice.name`, else `rate_limit.name`, else its key path as configured),
 * never the internal name of its policy.
 */
function ruleName(r: ResolvedLimit): string {
  return publicRuleName(r.rule);
}

/** Positional entries (e0, e1, ...): envoy descriptors may repeat a key; paths are unique per policy. */
function bucketDescriptor(r: ResolvedLimit): Descriptor {
  return r.bucketValues.map((value, i) => ({ key: `e${i}`, value }));
}

/**
 * Time kept from the caller's deadline for the answer's way back, in ms: the store is
 * given up this long before the caller would give up on Sluice.
 */
const DEADLINE_MARGIN_MS = 5;

/**
 * The limiter options that carry a call's deadline (less the margin) and cancellation,
 * made afresh for each store call from what is left of the caller's time.
 */
function callBudget(
  context: CallContext | undefined,
): () => { timeoutMs?: number; signal?: AbortSignal } {
  if (context === undefined) return () => ({});
  const { signal, timeoutMs } = context;
  if (timeoutMs === undefined) return () => ({ signal });
  const endsAt = performance.now() + timeoutMs - DEADLINE_MARGIN_MS;
  // Whole ms: the limiter keeps one deadline queue per distinct length.
  return () => ({ signal, timeoutMs: Math.max(1, Math.floor(endsAt - performance.now())) });
}
