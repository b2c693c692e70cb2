// The `sluice/engine` entry point: the parts a limiter is built from, for those who extend
// it: a store of their own (the `Store` contract and the bucket key), a stage in front of
// the store, an algorithm's pure transitions and their registry, and the recorder the
// limiter reports each check to. A library user needs only `sluice` (docs/design.md).
// Algorithms
export type { Algorithm, Quota, Settlement, Transition } from './algorithms/algorithm.js';
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

// Stores
export type {
  KeySpace,
  Store,
  StoreAnswer,
  StoreApplyOptions,
  StoreRequest,
  StoreResult,
  StoreSettleOptions,
  StoreSettleRequest,
  StoreSettleResult,
} from './stores/store.js';
export { bucketKey } from './stores/key.js';

// Stages
export type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StagePath,
  StageVerdict,
} from './limiter/stage.js';

// Metrics
export type { CheckRecorder, StoreCallEndedBy } from './metrics/check-recorder.js';
