import { createHash } from 'node:crypto';
import { systemClock, type Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import type { Descriptor } from '../core/descriptor.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import { StoreError } from '../core/errors.js';
import type { FailureMode, Policy } from '../core/policy.js';
import { algorithmOf } from '../algorithms/index.js';
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
import { DEFAULT_TIMEOUT_MS, type PolicySet } from '../config/policies.js';
import {
  createLimiter,
  type CheckItem,
  type Limiter,
  type StoreCallObserver,
} from '../limiter/limiter.js';
import type { RuleUsage } from '../metrics/rule-hits.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { Store } from '../stores/store.js';
import { rateLimitDynamicMetadata } from './dynamic-metadata.js';
import { toNativeCheckResponse } from './grpc/check-response.js';
import type {
  CallContext,
  NativeCheckRequest,
  NativeCheckResponse,
  RlsDescriptorStatus,
  RlsRequest,
  RlsResponse,
  RlsUnit,
} from './grpc/types.js';
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
}

const MAX_OVERRIDE_POLICIES = 10_000;

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
  readonly #clock: Clock;
  readonly #metrics: ServiceMetrics | undefined;
  readonly #options: RateLimitServiceOptions;
  #config: EnvoyConfig;
  /** Per rule, its policy for all-or-nothing batches and its counting one (per-descriptor). */
  readonly #rulePolicies = new WeakMap<EnvoyRule, { batch?: Policy; counting?: Policy }>();
  readonly #overridePolicies = new Map<string, Policy>();

  constructor(options: RateLimitServiceOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#metrics = options.metrics;
    this.#config = options.envoyConfig;
    this.#limiter = createLimiter({
      store: options.store,
      policies: options.policies ?? [],
      clock: this.#clock,
      ...options.descriptorLimits,
      ...(options.storeObserver === undefined ? {} : { storeObserver: options.storeObserver }),
      // Every decision, store call and bucket is counted by the limiter, under the rules'
      // public names (see #buildPolicy).
      ...(options.metrics === undefined ? {} : { metrics: options.metrics.limiter }),
    });
  }

  /** The envoy rules in force. */
  get envoyConfig(): EnvoyConfig {
    return this.#config;
  }

  /** Swaps rules and policies atomically: a request uses the old set or the new one. */
  reload(envoyConfig: EnvoyConfig, policies?: PolicySet): void {
    if (policies !== undefined) this.#limiter.setPolicies(policies);
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
      const itemOf = limited.map((r, i) => {
        if (r === undefined || droppedQuota.has(i)) return undefined;
        items.push({
          policy: this.#policyFor(r, independent),
          descriptor: bucketDescriptor(r),
          cost: deniedAnyway ? 0 : hits[i]!,
        });
        return items.length - 1;
      });
      const result = await this.#limiter.decideAt(nowMs, items, { ...callOptions(), independent });
      if (result.decisions.some((d) => d.status === 'UNAVAILABLE')) {
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
      if (usage !== undefined && r !== undefined)
        this.#metrics?.recordRuleCheck(req.domain, r.statsKey, usage);
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
    return toNativeCheckResponse(result);
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

  /** `counting`: the policy for per-descriptor decisions, which charges denials if it can. */
  #policyFor(r: ResolvedLimit, counting: boolean): Policy {
    const rule = r.rule;
    if (r.source === 'config') {
      let cached = this.#rulePolicies.get(rule);
      if (cached === undefined) this.#rulePolicies.set(rule, (cached = {}));
      const which = counting ? 'counting' : 'batch';
      return (cached[which] ??= this.#buildPolicy(rule, r.bucketValues.length, counting));
    }
    const key = `${rule.fullKey}|${rule.requestsPerUnit}|${rule.unit ?? ''}|${counting}`;
    let p = this.#overridePolicies.get(key);
    if (p === undefined) {
      if (this.#overridePolicies.size >= MAX_OVERRIDE_POLICIES) {
        this.#overridePolicies.delete(this.#overridePolicies.keys().next().value as string);
      }
      p = this.#buildPolicy(rule, r.bucketValues.length, counting);
      this.#overridePolicies.set(key, p);
    }
    return p;
  }

  #buildPolicy(rule: EnvoyRule, depth: number, counting: boolean): Policy {
    // As envoyproxy/ratelimit counts, a denial is charged too, where the algorithm can
    // (the fixed window: its count passes the limit until the window ends).
    const configured = rule.sluice.params!;
    const params: typeof configured =
      (counting
        ? (algorithmOf(rule.sluice.algorithm).chargingDenied?.(configured) as typeof configured)
        : undefined) ?? configured;
    // Internal name: safe in storage keys whatever the rule's path holds, and never shown
    // (metrics label it with the rule's public name, `publicRuleName`). The limit, algorithm and params are part
    // of it, so a reload that changes them (or how the window counts) starts fresh buckets.
    const fingerprint = `${rule.fullKey}|${rule.requestsPerUnit}|${rule.unit ?? ''}|${rule.sluice.algorithm}|${JSON.stringify(params)}`;
    const name = `envoy.${createHash('sha256').update(fingerprint).digest('hex').slice(0, 24)}`;
    // Metrics label the policy with the rule's public name, never the internal one.
    this.#metrics?.limiter.labelPolicy(name, publicRuleName(rule));
    const keys = Array.from({ length: depth }, (_, i) => `e${i}`);
    return Object.freeze({
      name,
      match: Object.freeze(keys.map((key) => Object.freeze({ key }))),
      identity: Object.freeze(keys.slice(0, 1)),
      algorithm: rule.sluice.algorithm,
      params,
      cost: Object.freeze({ defaultCost: 1, rules: Object.freeze([]) }),
      failureMode: rule.sluice.failureMode ?? this.#options.defaultFailureMode ?? 'open',
      timeoutMs: this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      shadow: rule.shadowMode,
    }) as Policy;
  }
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
