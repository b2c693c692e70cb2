import type { Decision } from '../core/decision.js';
import type { StoreError } from '../core/errors.js';
import type { Status } from '../core/status.js';

/** What ended a failed store call (the limiter's `StoreCallEnd`). */
export type StoreCallEndedBy = 'store' | 'deadline' | 'cancel';

/**
 * What the limiter tells its metrics (`LimiterOptions.metrics`). Every method is
 * synchronous, cheap and never throws; `LimiterMetrics` is the Prometheus one.
 */
export interface CheckRecorder {
  /**
   * One bucket a check asks of a policy, once per matched policy per check, before any
   * stage or the store answers: hot keys and active key cardinality. `policy` is the
   * policy's name, `key` its bucket key (never exported raw).
   */
  bucket(policy: string, key: string, cost: number, nowMs: number): void;
  /** One check was decided, `durationMs` after it started. */
  decided(status: Status, decisions: readonly Decision[], durationMs: number): void;
  /** One check was refused (`PolicyError`: invalid input), `durationMs` after it started. */
  refused(error: unknown, durationMs: number): void;
  /** One store call ended: answered (`error` undefined) or failed. */
  storeCall(durationMs: number, error?: StoreError, endedBy?: StoreCallEndedBy): void;
}
