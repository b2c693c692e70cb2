import type { Status } from './status.js';

/**
 * Every path a decision can come by: the store, a failure mode, a shadow policy, or a
 * pipeline stage (`local`, `cache`, `batch`, `lease`; see `StagePath`).
 */
export const DECISION_PATHS = Object.freeze([
  'store',
  'fail-open',
  'fail-closed',
  'stale',
  'shadow',
  'local',
  'cache',
  'batch',
  'lease',
] as const);

/** Which path produced a decision. */
export type DecisionPath = (typeof DECISION_PATHS)[number];

/**
 * What an algorithm's transition decides for one bucket: everything a {@link Decision}
 * carries except the policy name and the path, which the limiter adds.
 */
export interface AlgorithmDecision {
  readonly status: Status;
  /** Whether the request's cost was (or, for shadow policies, would be) admitted. */
  readonly allowed: boolean;
  /** The bucket's maximum capacity in units (burst, window limit or queue size). */
  readonly limit: number;
  /**
   * Units left after this decision. Refill-based algorithms (token bucket, GCRA, leaky
   * bucket, sliding window counter) keep fractional precision here; HTTP headers floor it.
   */
  readonly remaining: number;
  /** Milliseconds until this request's cost would fit; 0 when allowed. */
  readonly retryAfterMs: number;
  /** Milliseconds until the bucket is back to full capacity when left idle. */
  readonly resetAfterMs: number;
  /**
   * Leaky bucket in `delay` mode only: milliseconds the caller must wait before
   * proceeding so that output leaves at the configured rate. Absent otherwise.
   */
  readonly delayMs?: number;
}

/** One policy's decision for one request. */
export interface Decision extends AlgorithmDecision {
  /** The policy's stable public name (never a storage key). */
  readonly policy: string;
  /** Which path produced the decision; `store` when the store decided normally. */
  readonly path: DecisionPath;
}
