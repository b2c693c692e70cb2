// The `sluice/overload` entry point: concurrency limits (fixed, AIMD, gradient) with
// criticality-aware shedding, a bounded queue, a circuit breaker, the admission boundary
// that composes them, client-side adaptive throttling and a retry budget.
export {
  AdmissionBoundary,
  createAdmissionBoundary,
  type Admission,
  type AdmissionBoundaryOptions,
  type AdmissionPermit,
  type AdmissionStats,
  type AdmitOptions,
} from './overload/admission-boundary.js';
export { AimdLimit, type AimdLimitOptions } from './overload/aimd-limit.js';
export {
  BoundedQueue,
  type BoundedQueueOptions,
  type QueueRejection,
} from './overload/bounded-queue.js';
export {
  CircuitBreaker,
  type BreakerOutcome,
  type BreakerPermit,
  type BreakerState,
  type CircuitBreakerOptions,
} from './overload/circuit-breaker.js';
export { ClientThrottle, type ClientThrottleOptions } from './overload/client-throttle.js';
export {
  ConcurrencyLimiter,
  type ConcurrencyLimiterOptions,
  type ConcurrencyPermit,
  type PermitOutcome,
} from './overload/concurrency-limiter.js';
export {
  CRITICALITIES,
  DEFAULT_CRITICALITY,
  criticalityRank,
  parseCriticality,
  type Criticality,
} from './core/criticality.js';
export { FixedLimit } from './overload/fixed-limit.js';
export { GradientLimit, type GradientLimitOptions } from './overload/gradient-limit.js';
export type { LimitAlgorithm, LimitSample } from './overload/limit-algorithm.js';
export { LoadShedder } from './overload/load-shedder.js';
export { DEFAULT_SHARES, type CriticalityShares } from './config/criticality-shares.js';
export { OVERLOAD_CODES, OverloadError, type OverloadReason } from './overload/overload-error.js';
export {
  ADMISSION_OUTCOMES,
  type AdmissionOutcome,
  type OverloadRecorder,
} from './overload/recorder.js';
export { RetryBudget, type RetryBudgetOptions } from './overload/retry-budget.js';
export { ManualTimer, systemTimer, type Timer } from './overload/timer.js';
export { OverloadMetrics } from './overload/overload-metrics.js';
export {
  overloadSchema,
  parseOverloadConfig,
  type OverloadConfig,
  type OverloadInput,
} from './config/overload-schema.js';
