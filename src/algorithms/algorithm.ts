import type { z } from 'zod';
import type { AlgorithmDecision } from '../core/decision.js';
import type { AlgorithmCosts } from './costs.js';

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
 * - a denied request consumes nothing, and reports the remaining capacity it found;
 * - except under params from `chargingDenied` (see there), where a denied request is
 *   charged too, and a cost above capacity is `OVER_LIMIT` with `retryAfterMs` Infinity.
 */
export interface Algorithm<P, S> {
  /** Its name in policy files (`algorithm: token-bucket`): its key in the registry, `ALGORITHMS`. */
  readonly kind: string;
  /** What a bucket costs its Redis, for capacity plans (`sluice plan`). */
  readonly costs: AlgorithmCosts;
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
  /**
   * `params` changed so that every request is charged, admitted or denied, as
   * envoyproxy/ratelimit counts (an INCRBY per hit, compared with the limit afterwards):
   * a denial still adds its cost, so the count can pass the limit and keeps denying until
   * the window ends. Only an algorithm that can count that way has it (fixed window).
   */
  chargingDenied?(params: P): P;
  /**
   * Whether `params` charge a denied request (came from `chargingDenied`): a store then
   * writes a denial's state too, whatever the rest of its batch decides.
   */
  chargesDenied?(params: P): boolean;
  /**
   * `transition` as an allocation-free step, for a store that owns its states and can
   * update them in place (MemoryStore). `transition` is built from the same step, so the
   * two cannot disagree. Absent for the sliding log, whose state is a list.
   */
  readonly inPlace?: InPlaceStep<P, S>;
  /**
   * Its code in the Lua scripts: `CODE_<KIND>`, which scripts.ts writes into the scripts'
   * constants from this field, and the `ALG[code]` its Lua file defines. 1..255 (the state's first byte), one per algorithm.
   */
  readonly luaCode: number;
  /**
   * The four numbers (p1..p4) its Lua include reads, from the validated params, in the
   * order the include names them (unused ones 0).
   */
  scriptParams(params: P): readonly [number, number, number, number];
  /**
   * Units an idle bucket regains per ms, for the `stale` failure mode's local budget while
   * the store is away. 0 when a local copy cannot follow the refill (window algorithms
   * reset at boundaries): stale decisions then stay on the safe side.
   */
  refillPerMs(params: P): number;
  /** What the `RateLimit-Policy` header advertises for these params (see {@link Quota}). */
  quota(params: P): Quota;
  /** What it admits over time, for the bounds of local stages and batches. */
  sustainedRate(params: P): SustainedRate;
  /**
   * Whether its admissions carry a wait (`delayMs`) the caller must serve: such decisions
   * cannot be handed out later from a reserve. @default false when absent
   */
  answersWithDelay?(params: P): boolean;
  /**
   * Gives back `cost` units that an admitted transition at `consumedAtMs` took, at `nowMs`
   * (shortly after): the cross-slot refund (see `refundState`). Pure; `state` is never
   * mutated. The state to write, or `undefined` when nothing of that consumption is still
   * counted. Bounded: never above the maximum capacity, never below zero.
   */
  refund(state: S, nowMs: number, consumedAtMs: number, cost: number, params: P): S | undefined;
  /**
   * Settles a reservation of `estimate` units admitted at `reservedAtMs` whose call used
   * `actual` units, at `nowMs` (docs/costs.md). Pure; `state` is never mutated, and
   * `undefined` is a fresh bucket. Less than the estimate gives the difference back,
   * bounded like `refund` (never above the maximum capacity; a window that has passed
   * holds nothing to give back). More charges the excess now, and may take the bucket
   * below empty by at most `maxDebt` units: the excess beyond that is not charged but
   * reported (`cappedUnits`). A charge never gives anything back, even when a bucket is
   * already deeper in debt than `maxDebt` (a policy whose cap was lowered).
   */
  settle(
    state: S | undefined,
    nowMs: number,
    reservedAtMs: number,
    estimate: number,
    actual: number,
    maxDebt: number,
    params: P,
  ): Settlement<S>;
  /** Whether its capacity is set apart from its rate (a `burst` or `capacity` param). */
  readonly hasBurst: boolean;
  /**
   * The user-facing params (as `paramsSchema` takes them) for `units` per `periodMs`, with
   * capacity `burst` (default `units`) where {@link Algorithm.hasBurst}: what an Envoy
   * rule's `requests_per_unit` and `unit` become.
   */
  paramsFor(units: number, periodMs: number, burst?: number): Record<string, number>;
}

/** What {@link Algorithm.settle} returns. */
export interface Settlement<S> {
  /** The state to write; `undefined` when there is nothing to write. */
  readonly state: S | undefined;
  /** Units of the excess that were not charged because the debt cap was reached. */
  readonly cappedUnits: number;
  /** Units the bucket is below empty after the settle: 0 up to `maxDebt`. */
  readonly debt: number;
  /**
   * Milliseconds from `nowMs` until `state` decides like a fresh one (at least as long as
   * `ttlMs` would keep it, longer while a debt is repaid): how long a store keeps it.
   */
  readonly lifeMs: number;
}

/**
 * A policy's quota as advertised: `units` per `windowMs` (a rate over its period, or a
 * limit per window) and, for an algorithm whose burst is apart from its rate, `burst`.
 */
export interface Quota {
  readonly units: number;
  readonly windowMs: number;
  readonly burst?: number;
}

/** What an algorithm admits over time: a sustained rate and what may come at once. */
export interface SustainedRate {
  /** Units admitted per second, sustained. */
  readonly perSecond: number;
  /**
   * Most units admitted at one instant: the burst (token bucket, GCRA), the queue (leaky
   * bucket), or twice the limit across a fixed window's boundary (the limit for the
   * sliding algorithms).
   */
  readonly atOnce: number;
  /** The window, for window algorithms (their counts start again each window). */
  readonly windowMs?: number;
}

/** `T` with its fields writable: a state being written in place. */
export type Writable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * A decision being written in place. `delayMs` may hold `undefined`, which means absent,
 * so that a store can reuse one object for decisions with and without it.
 */
export type DecisionCell = Writable<Omit<AlgorithmDecision, 'delayMs'>> & {
  delayMs?: number | undefined;
};

/**
 * The arithmetic of a transition, writing its outputs instead of allocating them.
 *
 * `step(state, nowMs, cost, params, next, out)` writes into `next` every field of the
 * state `transition` would return and into `out` every field of its decision (`delayMs`
 * only when the decision has one; a caller reusing `out` clears it first). `state` is
 * only read, and is never the same object as `next`; it may carry other fields, which the
 * step ignores. A store commits by copying `next` into its own object (`copy`, see
 * MemoryStore), so a denial leaves the bucket as it was.
 */
export interface InPlaceStep<P, S> {
  step(
    state: S | undefined,
    nowMs: number,
    cost: number,
    params: P,
    next: Writable<S>,
    out: DecisionCell,
  ): void;
  /** A new state object for `next` (its fields are all overwritten by `step`). */
  blank(): Writable<S>;
  /** Writes every field of the state `from` into `to`, leaving `to`'s other fields alone. */
  copy(from: S, to: Writable<S>): void;
}

/**
 * The pure `transition` of an in-place step: a new state and a new decision per call.
 * The fields are written in the order of the `AlgorithmDecision` interface, so the
 * decision is the same literal a hand-written transition would build.
 */
export function pureTransition<P, S>(
  inPlace: InPlaceStep<P, S>,
): (state: S | undefined, nowMs: number, cost: number, params: P) => Transition<S> {
  return (state, nowMs, cost, params) => {
    const next = inPlace.blank();
    const out = decisionCell();
    inPlace.step(state, nowMs, cost, params, next, out);
    return { state: next, decision: out as AlgorithmDecision };
  };
}

/** A new decision cell for a step to write into (no `delayMs` until a step sets one). */
export function decisionCell(): DecisionCell {
  return { status: 'OK', allowed: false, limit: 0, remaining: 0, retryAfterMs: 0, resetAfterMs: 0 };
}

/** Writes a decision's fields into `out` (every field but `delayMs`). */
export function decide(
  out: DecisionCell,
  status: AlgorithmDecision['status'],
  limit: number,
  remaining: number,
  retryAfterMs: number,
  resetAfterMs: number,
): void {
  out.status = status;
  out.allowed = status === 'OK';
  out.limit = limit;
  out.remaining = remaining;
  out.retryAfterMs = retryAfterMs;
  out.resetAfterMs = resetAfterMs;
}

/**
 * Float tolerance for "does the cost fit". Refill arithmetic on doubles can land a hair
 * under an integer it mathematically equals (e.g. 0.1 + 0.2); without it a request that
 * fits exactly would be denied. Capacity created by it is at most 1e-9 units per decision
 * and is clamped away (state never goes negative).
 */
export const FIT_EPSILON = 1e-9;

/** The decision for a cost that can never fit (see the transition contract). */
export function unfittableDecision(
  limit: number,
  remaining: number,
  resetAfterMs: number,
): AlgorithmDecision {
  const out = decisionCell();
  unfittable(out, limit, remaining, resetAfterMs);
  return out as AlgorithmDecision;
}

/**
 * Writes the decision for a cost that can never fit (see the transition contract). No
 * wait makes it fit, but the state still empties or refills: `resetAfterMs` is the
 * state's own, what a cost-0 read would report, so an RLS answer says when the bucket
 * is full again rather than 0.
 */
export function unfittable(
  out: DecisionCell,
  limit: number,
  remaining: number,
  resetAfterMs: number,
): void {
  decide(out, 'INVALID_POLICY', limit, remaining, 0, resetAfterMs);
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
