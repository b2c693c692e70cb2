/** One finished request, as a concurrency limit algorithm sees it. */
export interface LimitSample {
  /** When the request finished, in ms. */
  readonly nowMs: number;
  /** How long it held its permit, in ms. */
  readonly rttMs: number;
  /** Requests in flight when it was admitted, itself included. */
  readonly inflight: number;
  /**
   * It timed out or the dependency said it was overloaded: a signal to back off. Its RTT
   * says nothing about queueing (a drop is often answered at once) and is not used.
   */
  readonly dropped: boolean;
  /**
   * Since the previous sample, some request found no room under the limit (it was
   * queued or refused): demand exceeds the limit, even if in-flight looks low because
   * criticality ceilings kept it below the limit.
   */
  readonly limited: boolean;
}

/**
 * How many requests may be in flight, and how that number follows the samples. The
 * concurrency limiter reads `limit` at every admission and reports every finished
 * request to `onSample` (synchronously; implementations must not throw).
 */
export interface LimitAlgorithm {
  /** The current limit, a whole number ≥ 1. */
  readonly limit: number;
  onSample(sample: LimitSample): void;
}
