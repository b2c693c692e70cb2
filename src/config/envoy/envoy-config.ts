import type { PolicyIssue } from '../../core/errors.js';
import type { AlgorithmKind } from '../../algorithms/index.js';
import type { BatchSettings, FailureMode, LocalSettings } from '../../core/policy.js';

/**
 * Time units of envoyproxy/ratelimit's `rate_limit.unit`, in its order. The YAML
 * spelling is case-insensitive (`minute`, `Minute` and `MINUTE` are the same unit);
 * `unknown` is rejected like any other unknown word.
 */
export const ENVOY_UNITS = Object.freeze([
  'second',
  'minute',
  'hour',
  'day',
  'week',
  'month',
  'year',
] as const);
export type EnvoyUnit = (typeof ENVOY_UNITS)[number];

const UNIT_SECONDS: Readonly<Record<EnvoyUnit, number>> = Object.freeze({
  second: 1,
  minute: 60,
  hour: 3_600,
  day: 86_400,
  week: 604_800,
  // Upstream's fixed lengths, not calendar months or years: a "month" window is always
  // 30 days and a "year" window 365 days, both aligned to the Unix epoch.
  month: 2_592_000,
  year: 31_536_000,
});

/**
 * Length of one window of `unit` in seconds, as upstream divides time: month = 30 days,
 * year = 365 days (no calendar arithmetic, no leap handling).
 */
export function unitToSeconds(unit: EnvoyUnit): number {
  return UNIT_SECONDS[unit];
}

/** Length of one window of `unit` in milliseconds; see {@link unitToSeconds}. */
export function unitToMs(unit: EnvoyUnit): number {
  return UNIT_SECONDS[unit] * 1_000;
}

/**
 * The unit for a YAML spelling, or `undefined` when it is not one. Upstream upper-cases
 * the text (Unicode rules, so `ſecond` with a long s is `SECOND`) and looks it up.
 */
export function parseEnvoyUnit(text: string): EnvoyUnit | undefined {
  const upper = text.toUpperCase();
  return ENVOY_UNITS.find((u) => u.toUpperCase() === upper);
}

/**
 * Protobuf numbers of the unit enums on the wire (`RateLimitResponse.RateLimit.Unit` and
 * `envoy.type.v3.RateLimitUnit`): week was added last, as 7. 0 is UNKNOWN.
 */
export const ENVOY_UNIT_NUMBERS: Readonly<Record<EnvoyUnit, number>> = Object.freeze({
  second: 1,
  minute: 2,
  hour: 3,
  day: 4,
  month: 5,
  year: 6,
  week: 7,
});

/** Sluice's own settings on one rule, from its `sluice:` block, defaults applied. */
export interface SluiceRuleOptions {
  /**
   * How capacity changes with time. @default "fixed-window" (upstream's epoch-aligned
   * window of one `unit`, `requests_per_unit` per window)
   */
  readonly algorithm: AlgorithmKind;
  /**
   * Capacity in units for token-bucket and gcra (burst) and leaky-bucket (queue size).
   * @default requests_per_unit
   */
  readonly burst?: number;
  /** What happens when the store cannot decide. Absent: the limiter's default. */
  readonly failureMode?: FailureMode;
  /** Stable public name returned to clients; see {@link publicRuleName}. */
  readonly name?: string;
  /** The local stage's bucket per descriptor value (docs/local-and-batching.md). */
  readonly local?: LocalSettings;
  /** Token batching (docs/local-and-batching.md). */
  readonly batch?: BatchSettings;
  /**
   * The algorithm's validated parameters (times in ms), built from `requests_per_unit`,
   * `unit` and `burst`. Absent when the rule is unlimited or `requests_per_unit` is 0
   * (upstream's "deny everything" idiom, which no algorithm needs to run).
   */
  readonly params?: Readonly<Record<string, number | string>>;
}

/** A rate limit attached to a descriptor node (upstream's `RateLimit`). */
export interface EnvoyRule {
  /** Requests per `unit`; 0 denies every request. 0 when unlimited and not given. */
  readonly requestsPerUnit: number;
  /** Absent exactly when `unlimited` is true. */
  readonly unit?: EnvoyUnit;
  /** Never limited: answered OK with remaining 2^32-1, never sent to the store. */
  readonly unlimited: boolean;
  /** `rate_limit.name`; '' when not given (upstream treats '' as "no name"). */
  readonly name: string;
  /** Names from `rate_limit.replaces`, in file order. */
  readonly replaces: readonly string[];
  /** Decide and record, but always answer OK for this rule. */
  readonly shadowMode: boolean;
  /** Over-limit only counts when every quota-mode descriptor of a request is over. */
  readonly quotaMode: boolean;
  /** Metric key uses the request's values for every entry. */
  readonly detailedMetric: boolean;
  /**
   * The rule's configured key: the domain and the composite keys of the path, e.g.
   * `messaging.message_type_marketing.to_number` (wildcards keep their `*`).
   */
  readonly fullKey: string;
  /** The descriptor's `metadata`, when given and not empty. */
  readonly metadata?: Readonly<Record<string, unknown>>;
  readonly sluice: SluiceRuleOptions;
}

/** A pre-split wildcard child of a level; see `wildcard.ts` for the matching rule. */
export interface EnvoyWildcard {
  /** The child's composite key, `key_pattern`, e.g. `path_/api/*`. */
  readonly compositeKey: string;
  /** `compositeKey` split on `*`; at least two parts. */
  readonly parts: readonly string[];
}

/** The children of a node (or a domain's top level). */
export interface EnvoyDescriptorLevel {
  /** Children by composite key (`key` or `key_value`); a prototype-free record. */
  readonly nodes: Readonly<Record<string, EnvoyDescriptorNode>>;
  /** Children whose composite key contains `*`, in load order (the match order). */
  readonly wildcards: readonly EnvoyWildcard[];
}

/** One `descriptors` entry of the YAML, loaded. */
export interface EnvoyDescriptorNode {
  readonly key: string;
  /** The configured value; absent for a key-only (default) descriptor. */
  readonly value?: string;
  /** `key`, or `key_value` when a value is given; the lookup key of this node. */
  readonly compositeKey: string;
  /** Domain plus the composite keys from the top, joined with `.`. */
  readonly fullKey: string;
  readonly rule?: EnvoyRule;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly children: EnvoyDescriptorLevel;
  /** File the descriptor came from, and its path inside it (`descriptors[0]`). */
  readonly file: string;
  readonly path: string;
}

/**
 * How the descriptors of one request are charged:
 * - `per-descriptor`: as envoyproxy/ratelimit counts. Each limited descriptor's counter
 *   is charged its hits, whatever the other descriptors answer, and its answer is about
 *   its own counter; a descriptor that appears twice is charged twice. A fixed window is
 *   charged even when it denies (its count passes the limit until the window ends).
 * - `all-or-nothing`: one atomic batch; a request that is denied is charged nowhere.
 */
export const DECISION_MODES = Object.freeze(['per-descriptor', 'all-or-nothing'] as const);
export type DecisionMode = (typeof DECISION_MODES)[number];

/** A domain: its top-level descriptors, possibly merged from several files. */
export interface EnvoyDomain {
  readonly domain: string;
  readonly descriptors: EnvoyDescriptorLevel;
  /** Files that contributed, in load order. */
  readonly files: readonly string[];
  /** The domain's `sluice.decision`; absent: the service's default. */
  readonly decision?: DecisionMode;
}

/** A validated, deep-frozen envoyproxy/ratelimit configuration. */
export interface EnvoyConfig {
  /** Domains by name; a prototype-free record. */
  readonly domains: Readonly<Record<string, EnvoyDomain>>;
  /**
   * Things upstream accepts silently but that are probably mistakes (a known key at a
   * level where it is ignored, a repeated YAML key, a second YAML document, ...).
   */
  readonly warnings: readonly PolicyIssue[];
}

/**
 * The name to show clients for a rule: `sluice.name`, else `rate_limit.name`, else the
 * rule's configured full key (which holds configured values only, never request values).
 */
export function publicRuleName(rule: EnvoyRule): string {
  return rule.sluice.name ?? (rule.name !== '' ? rule.name : rule.fullKey);
}
