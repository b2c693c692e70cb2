import type { Criticality } from '../core/criticality.js';
import type { OverloadReason } from './overload-error.js';
import type { PermitOutcome } from './concurrency-limiter.js';

/** How the boundary answered one request: admitted, or refused and why. */
export type AdmissionOutcome = 'admitted' | OverloadReason;

/** Every admission outcome, in a stable order. */
export const ADMISSION_OUTCOMES: readonly AdmissionOutcome[] = Object.freeze([
  'admitted',
  'shed',
  'queue-full',
  'queue-timeout',
  'deadline',
  'breaker-open',
]);

/**
 * Receives the boundary's events (the prom-client implementation is `OverloadMetrics` in
 * `sluice/overload`). Called synchronously on the request path: keep it cheap; it must
 * not throw (a throw is swallowed).
 */
export interface OverloadRecorder {
  /** One per admission decision; `waitedMs` is the time spent queued (0 when none). */
  admission(outcome: AdmissionOutcome, criticality: Criticality, waitedMs: number): void;
  /** One per released permit, with the time the request held it. */
  completion?(outcome: PermitOutcome, criticality: Criticality, heldMs: number): void;
}
