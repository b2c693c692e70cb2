/**
 * What a quota controller and its agents exchange (docs/design.md, "Quota leases"). The same
 * shapes travel over RLQS (see `rlqs-mapping.ts`) and inside the simulation.
 */

/** One global budget the controller shares out. */
export interface QuotaBudget {
  /** The bucket's stable name (for RLQS, the canonical text of its BucketId). */
  readonly bucket: string;
  /** Units per second the whole fleet may admit; > 0. */
  readonly ratePerSecond: number;
}

/** An agent's usage of one bucket since its previous report. */
export interface UsageReport {
  readonly agent: string;
  readonly bucket: string;
  /** Units admitted since the previous report. */
  readonly allowed: number;
  /** Units denied since the previous report (unmet demand). */
  readonly denied: number;
  /** Milliseconds the counts cover; the controller's demand is (allowed + denied) / elapsed. */
  readonly elapsedMs: number;
  /** Higher is served first. @default 0 */
  readonly priority?: number;
  /** Relative share inside its priority band; > 0. @default 1 */
  readonly weight?: number;
  /** The lease the agent enforces now (its `version`), so the controller may forget older ones. */
  readonly heldVersion?: number;
}

/**
 * The right to admit `rate` units per second, at most `burst` units in any one window of
 * `windowMs` (aligned to multiples of `windowMs` on the agent's clock), for `ttlMs` after
 * the agent receives it.
 */
export interface Lease {
  readonly agent: string;
  readonly bucket: string;
  /** Units per second. */
  readonly rate: number;
  /** The most units admitted in one window: rate × windowMs / 1000. */
  readonly burst: number;
  readonly windowMs: number;
  /** How long the lease holds once received; the agent's fallback applies after. */
  readonly ttlMs: number;
  /** Increases with every lease the agent is sent; ordered after `fencingToken`. */
  readonly version: number;
  /** The leader's fencing token: agents refuse a lease whose token is below one they saw. */
  readonly fencingToken: number;
  /** Controller time when it was issued. */
  readonly issuedAtMs: number;
}

/** What an agent does when it holds no lease in force (never heard, or expired). */
export type LeaseFallback =
  /** Admit at most `rate` units per second (at most rate × window per window). */
  | { readonly kind: 'static'; readonly rate: number }
  /** Deny everything. */
  | { readonly kind: 'deny' }
  /** Ask the global store, as if there were no lease stage. */
  | { readonly kind: 'store' };
