import type { z } from 'zod';
import type { AlgorithmDecision } from '../core/decision.js';
import type { AlgorithmKind } from '../core/policy.js';

/** What one transition returns: the bucket's next state and the decision. */
export interface Transition<S> {
  readonly state: S;
  readonly decision: AlgorithmDecision;
}

/**
 * One rate-limiting algorithm: a pure, total state transition plus the facts a store
 * needs. `transition` is the specification every store (memory, Lua) implements.
 *
 * Contract of `transition(state, nowMs, cost, params)`:
 * - pure: no I/O, no clock reads; `state` is never mutated;
 * - `state` undefined means "no state yet" and behaves as a full, fresh bucket;
 * - `nowMs` may go backwards; that never creates capacity;
 * - `cost` is a non-negative safe integer; cost 0 only reads (nothing is consumed);
 *   a cost above `capacity(params)` returns status `INVALID_POLICY`, allowed false and
 *   the state unchanged (the limiter rejects such costs earlier with a typed error);
 * - a denied request consumes nothing.
 */
export interface Algorithm<P, S> {
  readonly kind: AlgorithmKind;
  /**
   * Strict zod schema of the user-facing parameter fields of a policy (durations as
   * `"1s"` or ms numbers), producing the validated params (times in ms).
   */
  readonly paramsSchema: z.ZodType<P>;
  transition(state: S | undefined, nowMs: number, cost: number, params: P): Transition<S>;
  /** Idle time after which the state equals a fresh one, so a store may drop it. */
  ttlMs(params: P): number;
  /** The largest cost that can ever be admitted (burst, limit or queue size). */
  capacity(params: P): number;
}

/**
 * Float tolerance for "does the cost fit". Refill arithmetic on doubles can land a hair
 * under an integer it mathematically equals (e.g. 0.1 + 0.2); without it a request that
 * fits exactly would be denied. Capacity created by it is at most 1e-9 units per decision
 * and is clamped away (state never goes negative).
 */
export const FIT_EPSILON = 1e-9;

/** The decision for a cost that can never fit (see the transition contract). */
export function unfittable<S>(state: S, limit: number, remaining: number): Transition<S> {
  return {
    state,
    decision: {
      status: 'INVALID_POLICY',
      allowed: false,
      limit,
      remaining,
      retryAfterMs: 0,
      resetAfterMs: 0,
    },
  };
}

/**
 * The wait from `nowMs` until `targetMs` such that `nowMs + wait >= targetMs` holds in
 * doubles, so a caller coming back at exactly `nowMs + retryAfterMs` is past the instant
 * it was told about. The plain difference can land an ulp short when the two instants
 * differ greatly in magnitude; then the wait grows by a few ulps.
 */
export function waitUntil(nowMs: number, targetMs: number): number {
  let waitMs = targetMs - nowMs;
  // 4 ulps of the largest magnitude involved always moves the sum, so this ends in a step or two.
  const stepMs = 4 * Math.max(1, Math.abs(targetMs), Math.abs(nowMs)) * Number.EPSILON;
  while (nowMs + waitMs < targetMs) waitMs += stepMs;
  return waitMs;
}
