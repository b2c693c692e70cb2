import type { Registry } from 'prom-client';
import type { Clock } from '../core/clock.js';
import type { Decision } from '../core/decision.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import type { PolicyInput, PolicySet } from '../config/policies.js';
import type { CheckRecorder } from '../metrics/check-recorder.js';
import type { StageRecorder } from '../metrics/stage-metrics.js';
import type { Store } from '../stores/store.js';
import type { Stage } from './stage.js';
import type { StoreCallObserver } from './store-gateway.js';

/** What the limiter and its checks take: `LimiterOptions`, `CheckOptions`. */

/**
 * Options of {@link createLimiter}. The descriptor limits (`maxDescriptorEntries`,
 * `maxDescriptorKeyLength`, `maxDescriptorValueLength`; see `DescriptorLimits`) bound
 * what `check` accepts; their defaults are 32 entries, 256 and 1024 UTF-16 code units.
 */
export interface LimiterOptions extends Partial<Omit<DescriptorLimits, 'maxDescriptors'>> {
  readonly store: Store;
  /** Validated policies (`loadPolicyFile`, `parsePolicies`) or plain inputs, validated here. */
  readonly policies: PolicySet | readonly PolicyInput[];
  /** @default the system clock (monotonic, wall-aligned) */
  readonly clock?: Clock;
  /** Told how each call to an asynchronous store ended. @default none */
  readonly storeObserver?: StoreCallObserver;
  /**
   * The pipeline's stages, in order (a local bucket, an over-limit cache, a token batch, a
   * quota lease; see `Stage`). Each check's items pass them before the store; a stage
   * applies only to the policies its `appliesTo` accepts, asked once per policy set.
   * {@link Limiter.close} closes them. @default the local stages (`localStages`): the local
   * bucket and the token batch, which take part only in checks of policies with `local`
   * or `batch`, and the over-limit cache when `overLimitCacheBytes` is above 0
   */
  readonly stages?: readonly Stage[];
  /**
   * Stages after the default ones (`createLimiter` only): the local stages first, then
   * these, e.g. a quota lease. Unused when `stages` is given. @default none
   */
  readonly moreStages?: readonly Stage[];
  /**
   * Bytes of the over-limit cache among the default stages (a bucket the store just denied
   * is denied in process until its retry time; envoyproxy/ratelimit's
   * `LOCAL_CACHE_SIZE_IN_BYTES`). Unused when `stages` is given. @default 0 (no cache)
   */
  readonly overLimitCacheBytes?: number;
  /**
   * Where the limiter's metrics go: a `LimiterMetrics` (keep it to read `hotKeys()`), or
   * any `CheckRecorder`. Decisions answered by a stage are counted with the stage's path
   * (`local`, `cache`, `batch`, `lease`). See docs/metrics.md. @default none, or one made
   * in `registry`
   */
  readonly metrics?: CheckRecorder;
  /**
   * A prom-client registry to register the limiter's metrics in (a `LimiterMetrics` with
   * default options, read back from {@link Limiter.metrics}). Ignored with `metrics`.
   * @default none: no metrics
   */
  readonly registry?: Registry;
  /**
   * Told the units the default stages' token batch reserves, spends and gives back
   * (`StageMetrics`; see docs/metrics.md). Unused when `stages` is given: pass it to those
   * stages' own options. @default none
   */
  readonly stageMetrics?: StageRecorder;
}

/**
 * Told each decision of a check with its bucket's key (`bucketKey` text, without a store
 * prefix) and its index among the check's decisions, before the check returns. What it
 * throws is ignored.
 */
export type DecisionListener = (decision: Decision, key: string, index: number) => void;

export interface CheckOptions {
  /**
   * Units this call consumes in every matched policy, overriding the policies' cost
   * rules. A non-negative safe integer; 0 reads without consuming.
   */
  readonly cost?: number;
  /**
   * Check only these policies (by name). Each must exist and match the descriptor;
   * otherwise the check throws. @default every policy the descriptor matches
   */
  readonly policies?: readonly string[];
  /**
   * The caller's own budget for this check, in ms: the store is never waited on longer
   * than this or than any matched policy's `timeout`.
   */
  readonly timeoutMs?: number;
  /**
   * The caller's cancellation: when it aborts, the check stops waiting for the store and
   * the policies' failure modes decide (the store may still apply the consume).
   */
  readonly signal?: AbortSignal;
  /**
   * Makes the consume idempotent: a retry with the same id within the store's dedup TTL
   * returns the first decision without charging again. Ids are scoped to the identity
   * (hash tag) of the first matched policy's bucket: use ids unique per request. Up to 128
   * characters. Without it, nothing is ever retried automatically.
   */
  readonly requestId?: string;
  /**
   * Told each decision with its bucket's key (a decision log, a status page), so the
   * caller need not build the key again. @default none
   */
  readonly onDecision?: DecisionListener;
}
