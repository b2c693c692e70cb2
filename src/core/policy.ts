import type { DescriptorEntry } from './descriptor.js';

/**
 * What happens when the store cannot decide (timeout, outage):
 * - `open`: allow, and count it as a fail-open allow;
 * - `closed`: deny with status `UNAVAILABLE` (never `OVER_LIMIT`), counted as fail-closed;
 * - `stale`: keep deciding from the last budget the store reported for the bucket, in a
 *   local bucket, for `stale.ttlMs` after that report; then `stale.fallback` applies.
 */
export type FailureMode = 'open' | 'closed' | 'stale';

/** Settings of the `stale` failure mode. */
export interface StaleSettings {
  /** How long after the store's last answer for a bucket its budget may still be spent. */
  readonly ttlMs: number;
  /** What applies without a usable budget: no answer yet, or older than `ttlMs`. */
  readonly fallback: 'open' | 'closed';
}

/**
 * A coarse in-process bucket per bucket key, checked before the global store: each
 * instance admits at most `burst` units at once and `rate` per `periodMs` for one key
 * (a token bucket). It stops a flood before it reaches the store and keeps limiting when
 * the store is down. See docs/local-and-batching.md.
 */
export interface LocalSettings {
  /** Units added per `periodMs`, per instance and bucket key. */
  readonly rate: number;
  readonly periodMs: number;
  /** Most units one instance admits at once for one bucket key. */
  readonly burst: number;
}

/**
 * Token batching: an instance reserves up to `size` units from the global bucket in one
 * store call and admits from them in process. See docs/local-and-batching.md.
 */
export interface BatchSettings {
  /** Most units one reservation takes (a cold key reserves less; see the batch stage). */
  readonly size: number;
  /** How long reserved units may be spent; unspent ones are then dropped (under-use). */
  readonly ttlMs: number;
}

/**
 * Settling a reservation (`Limiter.reserve`): a settle whose actual cost is above the
 * estimate charges the excess, and may take the bucket below empty by at most `maxDebt`
 * units; later checks wait until that debt is repaid. See docs/costs.md.
 */
export interface SettleSettings {
  /** Units a settle may charge beyond empty. @default the policy's capacity (burst, limit or queue size) */
  readonly maxDebt?: number;
}

/**
 * One entry a descriptor must have for a policy to apply. With a `value`, the
 * descriptor's value must equal it (scope: "what is limited"). Without, any value
 * matches and each distinct value gets its own bucket (e.g. one bucket per tenant).
 */
export interface MatchEntry {
  readonly key: string;
  readonly value?: string;
}

/** A cost rule: when every entry of `when` is in the descriptor, the cost is `cost`. */
export interface CostRule {
  readonly when: readonly DescriptorEntry[];
  readonly cost: number;
}

/**
 * A validated, frozen policy. Build policies with `parsePolicies` / `loadPolicyFile`
 * (or pass plain inputs to `createLimiter`, which validates them the same way).
 */
export interface Policy {
  /** Stable public name returned to clients, e.g. `payments-tenant`. */
  readonly name: string;
  /** Entries a descriptor must have; see {@link MatchEntry}. Never empty. */
  readonly match: readonly MatchEntry[];
  /**
   * Match keys (without values) whose values say who is limited. They form the storage
   * key's hash tag, so one identity's buckets share a Redis Cluster slot. Empty for a
   * global policy.
   */
  readonly identity: readonly string[];
  /**
   * The algorithm's name, a key of the registry (`ALGORITHMS`, src/algorithms/index.ts);
   * the policy parsers accept only registered names.
   */
  readonly algorithm: string;
  /** Algorithm parameters, validated by the algorithm; times in ms. */
  readonly params: Readonly<Record<string, number | string>>;
  /** Cost of one request: the first matching rule, else `defaultCost`. */
  readonly cost: { readonly defaultCost: number; readonly rules: readonly CostRule[] };
  readonly failureMode: FailureMode;
  /** Present when `failureMode` is `stale`. */
  readonly stale?: StaleSettings;
  /**
   * Longest wait for the store, in ms; past it the failure mode decides. A check of
   * several policies waits for the smallest of their timeouts (and never longer than
   * the caller's own `timeoutMs`).
   */
  readonly timeoutMs: number;
  /** Decide and record, never enforce: the policy's denials never block a request. */
  readonly shadow: boolean;
  readonly description?: string;
  /** The local stage's bucket, when the policy has one. */
  readonly local?: LocalSettings;
  /** Token batching, when the policy has it. */
  readonly batch?: BatchSettings;
  /**
   * How reservations of this policy settle (`Limiter.reserve`, docs/costs.md), when the
   * policy file has a `settle` block. Without one, the defaults apply.
   */
  readonly settle?: SettleSettings;
}
