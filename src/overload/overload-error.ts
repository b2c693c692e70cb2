import type { ErrorCode } from '../core/error-codes.js';
import { SluiceError, type SluiceErrorOptions } from '../core/errors.js';

/**
 * Why the admission boundary refused a request:
 * - `shed`: its criticality's share of the concurrency limit is full (or a more critical
 *   request took its place in the queue);
 * - `queue-full`: the queue holds its maximum and nothing less critical is waiting;
 * - `queue-timeout`: it waited the queue's longest wait;
 * - `deadline`: its own deadline could not be met (refused at once, not after waiting);
 * - `breaker-open`: the circuit breaker refuses calls to the dependency.
 */
export type OverloadReason = 'shed' | 'queue-full' | 'queue-timeout' | 'deadline' | 'breaker-open';

/** The stable error code of each reason. */
export const OVERLOAD_CODES = Object.freeze({
  shed: 'SLUICE_ERR_OVERLOAD_SHED',
  'queue-full': 'SLUICE_ERR_OVERLOAD_QUEUE_FULL',
  'queue-timeout': 'SLUICE_ERR_OVERLOAD_QUEUE_TIMEOUT',
  deadline: 'SLUICE_ERR_OVERLOAD_DEADLINE',
  'breaker-open': 'SLUICE_ERR_OVERLOAD_BREAKER_OPEN',
} satisfies Record<OverloadReason, ErrorCode>);

/**
 * A request refused for overload (the boundary's `run`, or the retrying client's
 * throttle). Nothing was done: retrying later, after `retryAfterMs`, is safe.
 */
export class OverloadError extends SluiceError {
  /** How long the caller should wait before retrying, in ms. */
  readonly retryAfterMs: number;

  constructor(
    code: ErrorCode,
    message: string,
    retryAfterMs: number,
    options: SluiceErrorOptions = {},
  ) {
    super(code, message, options);
    this.name = 'OverloadError';
    this.retryAfterMs = retryAfterMs;
  }
}
