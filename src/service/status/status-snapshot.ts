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

/** Quota leases: this service as an agent of a controller (`SLUICE_LEASE_*`). */
export interface LeaseStatus {
  /** True when the service takes leases (`SLUICE_LEASE_CONTROLLERS`). */
  readonly inForce: boolean;
  /** One row per leased policy or rule. */
  readonly allocations: readonly LeaseAllocation[];
}

/** A leased policy's rule in force now. */
export interface LeaseAllocation {
  /** The policy's or rule's public name. */
  readonly policy: string;
  /** This agent's name. */
  readonly holder: string;
  /** `lease`, or `fallback` (no lease in force: cut off, or none received yet). */
  readonly mode: 'lease' | 'fallback';
  /** Units the rule in force admits in the current window (0 under the `store` fallback: the store decides). */
  readonly units: number;
  /** Units admitted in the current window. */
  readonly usedInWindow: number;
  readonly windowMs: number;
  /** The lease's rate, or the fallback's (`null` under `store`). */
  readonly ratePerSecond: number | null;
  /** When the lease stops holding; absent under the fallback. */
  readonly expiresAt?: string;
  /** The fencing token of the leader that sent the lease; absent under the fallback. */
  readonly fencingToken?: number;
  /** The fallback's kind (`static`, `deny`, `store`) while it applies. */
  readonly fallback?: string;
  /** The controller whose stream is open, or `null` when none is. */
  readonly controller: string | null;
  /** Leases refused (stale leader or version) since start. */
  readonly refused: number;
  /** The report period in use, in ms: the controller's once its stream said it. */
  readonly refreshMs?: number;
  /**
   * Set when this agent's configured refresh differs from the controller's (which it
   * then follows): both values, in ms.
   */
  readonly refreshMismatch?: { readonly agentMs: number; readonly controllerMs: number };
}
