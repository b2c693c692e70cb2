/**
 * What the status page (`GET /status`, and `/status?format=json`) shows: a plain data
 * model the service fills from its parts, so that each section's source can be swapped
 * (a hot-key tracker, lease allocations) without touching the page. Times are ISO 8601
 * UTC strings; counts are whole numbers. Nothing here holds a raw identity.
 */
export interface StatusSnapshot {
  /** When this snapshot was taken. */
  readonly generatedAt: string;
  /** When the service started. */
  readonly startedAt: string;
  readonly config: ConfigStatus;
  /** One row per policy or rule that decided since start, busiest first. */
  readonly decisions: readonly PolicyTally[];
  readonly hotKeys: HotKeyStatus;
  readonly store: StoreStatus;
  readonly leases: LeaseStatus;
}

/** The configuration in force. */
export interface ConfigStatus {
  /** When it was loaded (the start, or the last successful reload). */
  readonly loadedAt: string;
  /** The files it was read from. */
  readonly files: readonly string[];
  readonly policies: readonly PolicyInForce[];
  /** The last reload that was rejected since then, if any (the config above kept serving). */
  readonly lastRejected?: { readonly at: string; readonly message: string };
}

/** One policy (Sluice-native) or rule (envoyproxy/ratelimit config) in force. */
export interface PolicyInForce {
  /** The public name decisions are reported under. */
  readonly name: string;
  /** `sluice` for a native policy, `envoy` for a rule of envoy config. */
  readonly source: 'sluice' | 'envoy';
  /** The envoy domain; absent for native policies. */
  readonly domain?: string;
  /** The algorithm, or `unlimited` / `deny-all` for envoy rules that run none. */
  readonly algorithm: string;
  /** The limit in words, e.g. `100/s, burst 20` or `10 per minute`. */
  readonly limit: string;
  /** `open`, `closed` or `stale`; absent where the service's default applies. */
  readonly failureMode?: string;
  readonly shadow: boolean;
}

/** Decisions of one policy: since start, and over the last minute. */
export interface PolicyTally {
  readonly policy: string;
  readonly total: DecisionCounts;
  readonly lastMinute: DecisionCounts;
}

/** Counts of decisions. */
export interface DecisionCounts {
  /** Every decision, allowed or not. */
  readonly decisions: number;
  /** Enforced denials (over limit, or fail-closed while the store failed). */
  readonly denied: number;
  /** Shadow decisions that would have denied (never enforced). */
  readonly wouldDeny: number;
}

/** The busiest identities, hashed. */
export interface HotKeyStatus {
  /** Where the figures come from; absent when nothing tracks hot keys here. */
  readonly source?: string;
  readonly keys: readonly { readonly hash: string; readonly count: number }[];
}

/** The store and each shard's health. */
export interface StoreStatus {
  /** `memory`, `redis` or `redis-cluster`. */
  readonly kind: string;
  readonly shards: readonly ShardStatus[];
}

/** One shard (a Redis primary), or the whole store where shards are not told apart. */
export interface ShardStatus {
  readonly name: string;
  readonly state: 'healthy' | 'unhealthy';
  /** Whether the connection is up now; absent for the memory store. */
  readonly connected?: boolean;
  /** When it became unhealthy. */
  readonly since?: string;
  /** Failed store calls since it became unhealthy, by reason. */
  readonly failures?: Readonly<Record<string, number>>;
}

/** Quota-lease allocations. */
export interface LeaseStatus {
  /** False until the lease stage exists and leases are in force. */
  readonly inForce: boolean;
  readonly allocations: readonly {
    readonly policy: string;
    readonly holder: string;
    readonly units: number;
    readonly expiresAt: string;
  }[];
}
