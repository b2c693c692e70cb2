import { z } from 'zod';
import { borrowedCpu, measuredBytes } from './costs.js';
import {
  decide,
  type DecisionCell,
  FIT_EPSILON,
  pureTransition,
  unfittable,
  type Algorithm,
  type InPlaceStep,
  type Settlement,
  type Writable,
} from './algorithm.js';
import { capacityUnits, durationMs, positiveRate } from './params.js';

/**
 * What a leaky bucket does with a request that fits:
 * - `reject`: a policer; admit at once (no `delayMs`), deny what overflows;
 * - `delay`: a shaper; admit with `delayMs`, the wait until the queue ahead has leaked.
 */
export type LeakyBucketMode = 'reject' | 'delay';

/** Leaky bucket parameters (validated). */
export interface LeakyBucketParams {
  /** Units leaking out per `periodMs`. */
  readonly rate: number;
  readonly periodMs: number;
  /** Queue size in units: the most units held at once. */
  readonly capacity: number;
  readonly mode: LeakyBucketMode;
}

/** Leaky bucket state: units queued (fractional, 0..capacity) as of `tsMs`. */
export interface LeakyBucketState {
  readonly level: number;
  readonly tsMs: number;
}

const paramsSchema = z
  .object({
    /** Units leaking out per period, e.g. 100. */
    rate: positiveRate,
    /** The period `rate` is counted over. @default "1s" */
    period: durationMs.default(1_000),
    /** Queue size in units. @default ceil(rate) */
    capacity: capacityUnits.optional(),
    /** `reject` (police) or `delay` (shape). @default "reject" */
    mode: z.enum(['reject', 'delay']).default('reject'),
  })
  .strict()
  .transform((p): LeakyBucketParams => ({
    rate: p.rate,
    periodMs: p.period,
    capacity: p.capacity ?? Math.max(1, Math.ceil(p.rate)),
    mode: p.mode,
  }));

/** Milliseconds for `units` to leak out. Multiply first: keeps integer inputs exact. */
function leakMs(units: number, p: LeakyBucketParams): number {
  return (units * p.periodMs) / p.rate;
}

/**
 * Tolerance in units for "does the cost fit": FIT_EPSILON plus what one rounding step of
 * an epoch-ms timestamp leaks, so coming back exactly at `nowMs + retryAfterMs` admits.
 */
function fitSlack(tsMs: number, p: LeakyBucketParams): number {
  return FIT_EPSILON + (2 * Math.abs(tsMs) * Number.EPSILON * p.rate) / p.periodMs;
}

function step(
  state: LeakyBucketState | undefined,
  nowMs: number,
  cost: number,
  p: LeakyBucketParams,
  next: Writable<LeakyBucketState>,
  out: DecisionCell,
): void {
  let level: number;
  let tsMs: number;
  if (state === undefined) {
    level = 0;
    tsMs = nowMs;
  } else {
    // Backwards time: elapsed is 0 and tsMs keeps the later instant, so the same
    // interval never leaks twice.
    const elapsedMs = Math.max(0, nowMs - state.tsMs);
    level = Math.max(0, state.level - (elapsedMs * p.rate) / p.periodMs);
    tsMs = Math.max(state.tsMs, nowMs);
  }
  next.level = level;
  next.tsMs = tsMs;
  if (cost > p.capacity) {
    unfittable(out, p.capacity, Math.max(0, p.capacity - level), tsMs - nowMs + leakMs(level, p));
    return;
  }
  // Waits start from tsMs, which is later than nowMs when time went backwards.
  const lagMs = tsMs - nowMs;
  if (level + cost <= p.capacity + fitSlack(tsMs, p)) {
    const after = Math.min(p.capacity, level + cost);
    next.level = after;
    decide(out, 'OK', p.capacity, p.capacity - after, 0, lagMs + leakMs(after, p));
    // Shaping: the units already queued leave first, at exactly `rate`, so this
    // request's turn comes when they have leaked out (nginx limit_req without nodelay).
    if (p.mode === 'delay') out.delayMs = lagMs + leakMs(level, p);
    return;
  }
  // A denial gets no delayMs in either mode: it is not queued, and retryAfterMs is its wait.
  // Above capacity only after a settle charged a debt (see `settle`): no space to report.
  decide(
    out,
    'OVER_LIMIT',
    p.capacity,
    Math.max(0, p.capacity - level),
    lagMs + leakMs(level + cost - p.capacity, p),
    lagMs + leakMs(level, p),
  );
}

/** The state leaked to `nowMs` (an empty queue when there is none). */
function leaked(s: LeakyBucketState | undefined, nowMs: number, p: LeakyBucketParams) {
  if (s === undefined) return { level: 0, tsMs: nowMs };
  // Leak first, so a give-back never takes the level below zero.
  const elapsedMs = Math.max(0, nowMs - s.tsMs);
  const level = Math.max(0, s.level - (elapsedMs * p.rate) / p.periodMs);
  return { level, tsMs: Math.max(s.tsMs, nowMs) };
}

/**
 * Settle (see `Algorithm.settle`): leak to `nowMs`, then take `estimate - actual` out of
 * the queue (floored at empty) or add the excess, up to `capacity + maxDebt`. A level
 * above capacity denies every cost until it has leaked below.
 */
function settle(
  s: LeakyBucketState | undefined,
  nowMs: number,
  _reservedAtMs: number,
  estimate: number,
  actual: number,
  maxDebt: number,
  p: LeakyBucketParams,
): Settlement<LeakyBucketState> {
  const at = leaked(s, nowMs, p);
  const delta = actual - estimate;
  let level = at.level;
  let cappedUnits = 0;
  if (delta < 0) level = Math.max(0, level + delta);
  else if (delta > 0) {
    const wanted = level + delta;
    // Never below what it held: a queue already past the cap is not given anything.
    level = Math.max(level, Math.min(wanted, p.capacity + maxDebt));
    cappedUnits = wanted - level;
  }
  return {
    // Settled at the estimate: nothing to write.
    state: delta === 0 ? undefined : { level, tsMs: at.tsMs },
    cappedUnits,
    debt: Math.max(0, level - p.capacity),
    lifeMs: Math.ceil(at.tsMs - nowMs + leakMs(level, p)),
  };
}

const inPlace: InPlaceStep<LeakyBucketParams, LeakyBucketState> = {
  step,
  blank: () => ({ level: 0, tsMs: 0 }),
  copy: (from, to) => {
    to.level = from.level;
    to.tsMs = from.tsMs;
  },
};

/**
 * Leaky bucket: a queue of at most `capacity` units draining continuously at `rate` per
 * `periodMs`; a request adds `cost` units if they fit, else it is denied and adds nothing.
 *
 * In `reject` mode it admits exactly what a token bucket with `burst = capacity` admits
 * (level = capacity − tokens). In `delay` mode an admitted request also gets `delayMs`:
 * waiting that long before proceeding makes admitted units leave at no more than `rate`,
 * in arrival order, smoothing bursts instead of passing them through. `remaining` is the
 * free queue space, `resetAfterMs` the time until the queue is empty.
 */
export const leakyBucket: Algorithm<LeakyBucketParams, LeakyBucketState> = {
  kind: 'leaky-bucket',
  costs: {
    // Not benchmarked: it has the token bucket's state and step shape, so its figure is used.
    redisCpuUsPerDecision: borrowedCpu(
      14.25,
      'redis/c64/zipf/tb/allow',
      "the token bucket's figure",
    ),
    redisBytesPerBucket: measuredBytes(187, 'leaky-bucket'),
  },
  paramsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => Math.ceil(leakMs(p.capacity, p)),
  capacity: (p) => p.capacity,
  inPlace,
  luaCode: 3,
  scriptParams: (p) => [p.rate, p.periodMs, p.capacity, p.mode === 'delay' ? 1 : 0],
  refillPerMs: (p) => p.rate / p.periodMs,
  quota: (p) => ({ units: p.rate, windowMs: p.periodMs, burst: p.capacity }),
  sustainedRate: (p) => ({ perSecond: (p.rate * 1_000) / p.periodMs, atOnce: p.capacity }),
  answersWithDelay: (p) => p.mode === 'delay',
  refund: (s, nowMs, _consumedAtMs, cost, p) => {
    const at = leaked(s, nowMs, p);
    return { level: Math.max(0, at.level - cost), tsMs: at.tsMs };
  },
  settle,
  hasBurst: true,
  paramsFor: (units, periodMs, burst) => ({
    rate: units,
    period: periodMs,
    capacity: burst ?? units,
  }),
};
