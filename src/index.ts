// Core shapes
export type { Status } from './core/status.js';
export { STATUSES } from './core/status.js';
export type { AlgorithmDecision, Decision, DecisionPath } from './core/decision.js';
export type { Clock } from './core/clock.js';
export { ManualClock, SystemClock, systemClock } from './core/clock.js';
export type { Descriptor, DescriptorEntry, DescriptorInput } from './core/descriptor.js';
export { toDescriptor, DEFAULT_MAX_DESCRIPTOR_VALUE_LENGTH } from './core/descriptor.js';
export type { DescriptorLimits } from './core/descriptor-limits.js';
export { DEFAULT_DESCRIPTOR_LIMITS, descriptorLimits } from './core/descriptor-limits.js';
export type { CostRule, FailureMode, MatchEntry, Policy, StaleSettings } from './core/policy.js';
export { ALGORITHM_KINDS } from './algorithms/index.js';
export type { ErrorCode, ErrorCodeInfo, ErrorFamily } from './core/error-codes.js';
export { ERROR_CODES } from './core/error-codes.js';
export type { PolicyIssue, SluiceErrorOptions, StoreFailureReason } from './core/errors.js';
export { PolicyError, ProtocolError, SluiceError, StoreError, formatIssue } from './core/errors.js';
export { parseDurationMs } from './core/duration.js';

// Algorithms
export type { Algorithm, Quota, Transition } from './algorithms/algorithm.js';
export { ALGORITHMS, algorithmOf, isAlgorithmKind } from './algorithms/index.js';
export type { AlgorithmKind } from './algorithms/index.js';
export type { AlgorithmCosts, Measured } from './algorithms/costs.js';
export {
  tokenBucket,
  type TokenBucketParams,
  type TokenBucketState,
} from './algorithms/token-bucket.js';
export { gcra, type GcraParams, type GcraState } from './algorithms/gcra.js';
export {
  fixedWindow,
  type FixedWindowParams,
  type FixedWindowState,
} from './algorithms/fixed-window.js';
export {
  slidingLog,
  type SlidingLogParams,
  type SlidingLogState,
} from './algorithms/sliding-log.js';
export {
  slidingWindowCounter,
  type SlidingWindowCounterParams,
  type SlidingWindowCounterState,
} from './algorithms/sliding-window-counter.js';
export {
  leakyBucket,
  type LeakyBucketParams,
  type LeakyBucketState,
} from './algorithms/leaky-bucket.js';

// Policies
export type { PolicyInput, PolicySet } from './config/policies.js';
export { parsePolicies, parsePolicyDocument, POLICY_NAME } from './config/policies.js';
export { loadPolicyFile, parsePolicyText } from './config/load.js';

// Stores
export type {
  KeySpace,
  Store,
  StoreApplyOptions,
  StoreRequest,
  StoreResult,
} from './stores/store.js';
export type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StagePath,
  StageVerdict,
} from './limiter/stage.js';
export { bucketKey } from './stores/key.js';
export {
  MemoryStore,
  type MemoryStoreOptions,
  type MemoryStoreStats,
} from './stores/memory/memory-store.js';

// Limiter
export type { CheckResult } from './limiter/check-result.js';
export {
  Limiter,
  PlanQuery,
  type CheckOptions,
  type DecisionListener,
  type LimiterOptions,
  type PlanSpec,
} from './limiter/limiter.js';
export { createLimiter } from './local/create-limiter.js';

// Metrics (docs/metrics.md)
export type { CheckRecorder, StoreCallEndedBy } from './metrics/check-recorder.js';
export {
  LimiterMetrics,
  type HotKeyEntry,
  type HotPolicyEntry,
  type LimiterMetricsOptions,
} from './metrics/limiter-metrics.js';
export { RedisMetrics, type RedisMetricsOptions } from './metrics/redis-metrics.js';
export {
  StageMetrics,
  type StageMetricsOptions,
  type StageRecorder,
  type UnitStage,
} from './metrics/stage-metrics.js';
