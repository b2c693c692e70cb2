import type { EnvoyConfig, EnvoyRule, EnvoyUnit } from './envoy-config.js';
import { findRule, type EnvoyEntry, type RuleMatch } from './match.js';
import { ruleParams } from './sluice-extension.js';

/** A limit sent by the client with the descriptor (`RateLimitDescriptor.limit`). */
export interface EnvoyLimitOverride {
  readonly requestsPerUnit: number;
  readonly unit: EnvoyUnit;
}

/** The limit that applies to one descriptor, and where it came from. */
export interface ResolvedLimit {
  readonly rule: EnvoyRule;
  /**
   * Metric key: upstream's `FullKey` for a configured rule; for an override the
   * descriptor's keys only (see {@link resolveDescriptorLimit}).
   */
  readonly statsKey: string;
  /**
   * Values for the bucket key: one per entry for a configured rule; for an override the
   * entries' values, then their keys.
   */
  readonly bucketValues: readonly string[];
  /** `config` when a configured rule matched; `override` when the request supplied it. */
  readonly source: 'config' | 'override';
  /** The configured match; absent for an override. */
  readonly match?: RuleMatch;
}

/**
 * Upstream's key for a descriptor as sent (config_impl.go, `descriptorKey`): the domain,
 * then each entry as `key_value` (`key` alone when the value is empty), joined by `.`.
 */
export function descriptorKey(domain: string, entries: readonly EnvoyEntry[]): string {
  const parts = entries.map((e) => (e.value === '' ? e.key : `${e.key}_${e.value}`));
  return `${domain}.${parts.join('.')}`;
}

/**
 * The limit for one descriptor as upstream's `GetLimit` decides it:
 *
 * - unknown domain: `undefined`, even with an override;
 * - an override present: it applies whether or not a configured rule matches, and
 *   replaces it entirely: not shadow, not quota, no name, no `replaces`, no
 *   `detailed_metric`; it is a fixed window of one `unit`. Its bucket key holds the
 *   request's values and keys, so distinct descriptors never share a bucket. Its metric
 *   key and `fullKey` are the domain and the descriptor's keys, without values
 *   (`api.tenant.route`): upstream reports an override under {@link descriptorKey}, with
 *   the request's values, which lets every client create statistics at will; here the
 *   request's values never reach a metric label, and its policy (named from `fullKey`)
 *   is one per key list and limit, not one per value;
 * - otherwise: {@link findRule}.
 *
 * An override's unit must be known: upstream crashes on unit 0 (UNKNOWN); protocol
 * adapters reject it before calling this.
 */
export function resolveDescriptorLimit(
  config: EnvoyConfig,
  domain: string,
  entries: readonly EnvoyEntry[],
  override?: EnvoyLimitOverride,
): ResolvedLimit | undefined {
  if (config.domains[domain] === undefined) return undefined;
  if (override !== undefined) {
    const fullKey = descriptorKey(
      domain,
      entries.map((e) => ({ key: e.key, value: '' })),
    );
    const built =
      override.requestsPerUnit === 0
        ? undefined
        : ruleParams('fixed-window', override.requestsPerUnit, override.unit);
    const rule: EnvoyRule = Object.freeze({
      requestsPerUnit: override.requestsPerUnit,
      unit: override.unit,
      unlimited: false,
      name: '',
      replaces: Object.freeze([]),
      shadowMode: false,
      quotaMode: false,
      detailedMetric: false,
      fullKey,
      sluice: Object.freeze({
        algorithm: 'fixed-window' as const,
        ...(built !== undefined && 'params' in built ? { params: built.params } : {}),
      }),
    });
    return {
      rule,
      statsKey: fullKey,
      // Values first: the first bucket value is the store's identity (its Redis Cluster
      // hash tag), which should spread by value, as for configured rules.
      bucketValues: [...entries.map((e) => e.value), ...entries.map((e) => e.key)],
      source: 'override',
    };
  }
  const match = findRule(config, domain, entries);
  if (match === undefined) return undefined;
  return {
    rule: match.rule,
    statsKey: match.statsKey,
    bucketValues: match.bucketValues,
    source: 'config',
    match,
  };
}
