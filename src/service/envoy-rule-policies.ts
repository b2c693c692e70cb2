import { createHash } from 'node:crypto';
import { algorithmOf } from '../algorithms/index.js';
import { formatIssue, PolicyError, type PolicyIssue } from '../core/errors.js';
import type { FailureMode, Policy } from '../core/policy.js';
import {
  publicRuleName,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
  type EnvoyRule,
} from '../config/envoy/envoy-config.js';
import type { ResolvedLimit } from '../config/envoy/limit-override.js';
import { DEFAULT_TIMEOUT_MS } from '../config/policies.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { Store } from '../stores/store.js';

/** Most policies kept for descriptors' own limits (overrides); past that the oldest goes. */
const MAX_OVERRIDE_POLICIES = 10_000;

/**
 * The policies envoy rules compile to (one per rule and counting mode, kept per rule
 * object; one per override limit, kept by its text), their public names, and the check
 * that the store can run every rule of a config.
 */
export class EnvoyRulePolicies {
  readonly #store: Store;
  readonly #metrics: ServiceMetrics | undefined;
  readonly #defaultFailureMode: FailureMode | undefined;
  readonly #timeoutMs: number | undefined;
  /** Per rule, its policy for all-or-nothing batches and its counting one (per-descriptor). */
  readonly #byRule = new WeakMap<EnvoyRule, { batch?: Policy; counting?: Policy }>();
  readonly #overrides = new Map<string, Policy>();
  /** The public name of each envoy rule's policy built from config, by internal name. */
  readonly #publicNames = new Map<string, string>();

  constructor(options: {
    readonly store: Store;
    readonly metrics?: ServiceMetrics | undefined;
    readonly defaultFailureMode?: FailureMode | undefined;
    readonly timeoutMs?: number | undefined;
  }) {
    this.#store = options.store;
    this.#metrics = options.metrics;
    this.#defaultFailureMode = options.defaultFailureMode;
    this.#timeoutMs = options.timeoutMs;
  }

  /** The public name of a policy built from a configured rule; else `name` itself. */
  publicName(name: string): string {
    return this.#publicNames.get(name) ?? name;
  }

  /** `counting`: the policy for per-descriptor decisions, which charges denials if it can. */
  policyFor(r: ResolvedLimit, counting: boolean): Policy {
    const rule = r.rule;
    if (r.source === 'config') {
      let cached = this.#byRule.get(rule);
      if (cached === undefined) this.#byRule.set(rule, (cached = {}));
      const which = counting ? 'counting' : 'batch';
      let policy = cached[which];
      if (policy === undefined) {
        policy = cached[which] = this.#buildPolicy(rule, r.bucketValues.length, counting);
        // Configured rules only: a descriptor's own limit (an override) takes no lease.
        this.#publicNames.set(policy.name, publicRuleName(rule));
      }
      return policy;
    }
    const key = `${rule.fullKey}|${rule.requestsPerUnit}|${rule.unit ?? ''}|${counting}`;
    let p = this.#overrides.get(key);
    if (p === undefined) {
      if (this.#overrides.size >= MAX_OVERRIDE_POLICIES) {
        this.#overrides.delete(this.#overrides.keys().next().value as string);
      }
      p = this.#buildPolicy(rule, r.bucketValues.length, counting);
      this.#overrides.set(key, p);
    }
    return p;
  }

  /**
   * Throws a `PolicyError` listing every rule of `config` the store cannot run (its
   * `checkPolicy`, as the limiter asks for native policies), each under its file and path.
   */
  check(config: EnvoyConfig): void {
    const store = this.#store;
    const checkPolicy = store.checkPolicy?.bind(store);
    if (checkPolicy === undefined) return;
    const issues: PolicyIssue[] = [];
    let code: PolicyError['code'] | undefined;
    const walk = (level: EnvoyDescriptorLevel): void => {
      for (const node of Object.values(level.nodes)) {
        const rule = node.rule;
        if (rule?.sluice.params !== undefined && !rule.unlimited) {
          try {
            // Both ways the rule is decided; named as the operator knows it.
            for (const counting of [true, false]) {
              const policy = this.#buildPolicy(rule, 1, counting);
              checkPolicy({ ...policy, name: publicRuleName(rule) });
            }
          } catch (error) {
            if (!(error instanceof PolicyError)) throw error;
            code ??= error.code;
            issues.push({
              file: node.file,
              path: `${node.path}.rate_limit`,
              message: error.message,
            });
          }
        }
        walk(node.children);
      }
    };
    for (const d of Object.values(config.domains)) walk(d.descriptors);
    if (code !== undefined) {
      throw new PolicyError(code, issues.map(formatIssue).join('\n'), { issues });
    }
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
      failureMode: rule.sluice.failureMode ?? this.#defaultFailureMode ?? 'open',
      timeoutMs: this.#timeoutMs ?? DEFAULT_TIMEOUT_MS,
      shadow: rule.shadowMode,
      ...(rule.sluice.local === undefined ? {} : { local: rule.sluice.local }),
      // A shadow rule never blocks: units reserved for it would be held for nothing.
      ...(rule.sluice.batch === undefined || rule.shadowMode ? {} : { batch: rule.sluice.batch }),
    }) as Policy;
  }
}
