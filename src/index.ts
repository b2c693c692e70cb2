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
export type {
  CostRule,
  FailureMode,
  MatchEntry,
  Policy,
  SettleSettings,
  StaleSettings,
} from './core/policy.js';
export { ALGORITHM_KINDS, type AlgorithmKind } from './algorithms/index.js';
export type { ErrorCode, ErrorCodeInfo, ErrorFamily } from './core/error-codes.js';
export { ERROR_CODES } from './core/error-codes.js';
export type { PolicyIssue, SluiceErrorOptions, StoreFailureReason } from './core/errors.js';
export { PolicyError, ProtocolError, SluiceError, StoreError, formatIssue } from './core/errors.js';
export { parseDurationMs } from './core/duration.js';

// Policies
export type { PolicyInput, PolicySet } from './config/policies.js';
export { parsePolicies, parsePolicyDocument, POLICY_NAME } from './config/policies.js';
export { loadPolicyFile, parsePolicyText } from './config/load.js';

// Stores (implementing one, or a stage: `sluice/engine`)
export type { Store } from './stores/store.js';
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
  type Reservation,
  type ReserveOptions,
  type SettleOptions,
  type SettleResult,
} from './limiter/limiter.js';
export { createLimiter } from './local/create-limiter.js';

// Metrics (docs/metrics.md)
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
