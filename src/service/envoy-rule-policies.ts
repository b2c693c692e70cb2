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
import type { PlanSpec } from '../limiter/plan-query.js';
import type { Store } from '../stores/store.js';

/** Most policies kept for descriptors' own limits (overrides); past that the oldest goes. */
const MAX_OVERRIDE_POLICIES = 10_000;

/**
 * The plans envoy rules compile to, as specs (`PlanSpec`) the limiter compiles like a
 * policy file's policies: one per rule and counting mode, kept per rule object; one per
 * override limit, kept by its text. Each is named by its rule's public name and counts
 * as the domain says (independently: upstream's per-descriptor counting). Also the check
 * that the store can run every rule of a config.
 */
export class EnvoyRulePolicies {
  readonly #store: Store;
  readonly #defaultFailureMode: FailureMode | undefined;
  readonly #timeoutMs: number | undefined;
  /** Per rule, its spec for all-or-nothing checks and its counting one (per-descriptor). */
  readonly #byRule = new WeakMap<EnvoyRule, { batch?: PlanSpec; counting?: PlanSpec }>();
  readonly #overrides = new Map<string, PlanSpec>();
  /** The policies of override limits: a descriptor's own limit takes no lease. */
  readonly #overridePolicies = new WeakSet<Policy>();

  constructor(options: {
    readonly store: Store;
    readonly defaultFailureMode?: FailureMode | undefined;
    readonly timeoutMs?: number | undefined;
  }) {
    this.#store = options.store;
    this.#defaultFailureMode = options.defaultFailureMode;
    this.#timeoutMs = options.timeoutMs;
  }

  /** Whether `policy` is an override limit's (a descriptor's own limit, not a rule's). */
  isOverride(policy: Policy): boolean {
    return this.#overridePolicies.has(policy);
  }

  /**
   * The spec of a matched limit. `counting`: per-descriptor counting (independent), whose
   * policy charges denials where the algorithm can.
   */
  specFor(r: ResolvedLimit, counting: boolean): PlanSpec {
    const rule = r.rule;
    if (r.source === 'config') {
      let cached = this.#byRule.get(rule);
      if (cached === undefined) this.#byRule.set(rule, (cached = {}));
      const which = counting ? 'counting' : 'batch';
      return (cached[which] ??= this.#spec(rule, r.bucketValues.length, counting));
    }
    const key = `${rule.fullKey}|${rule.requestsPerUnit}|${rule.unit ?? ''}|${counting}`;
    let spec = this.#overrides.get(key);
    if (spec === undefined) {
      if (this.#overrides.size >= MAX_OVERRIDE_POLICIES) {
        this.#overrides.delete(this.#overrides.keys().next().value as string);
      }
      spec = this.#spec(rule, r.bucketValues.length, counting);
      this.#overridePolicies.add(spec.policy);
      this.#overrides.set(key, spec);
    }
    return spec;
  }

  #spec(rule: EnvoyRule, depth: number, counting: boolean): PlanSpec {
    return Object.freeze({
      policy: this.#buildPolicy(rule, depth, counting),
      name: publicRuleName(rule),
      independent: counting,
    });
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
    // (the plan goes by the rule's public name, `publicRuleName`). The limit, algorithm
    // and params are part of it, so a reload that changes them (or how the window
    // counts) starts fresh buckets.
    const fingerprint = `${rule.fullKey}|${rule.requestsPerUnit}|${rule.unit ?? ''}|${rule.sluice.algorithm}|${JSON.stringify(params)}`;
    const name = `envoy.${createHash('sha256').update(fingerprint).digest('hex').slice(0, 24)}`;
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
