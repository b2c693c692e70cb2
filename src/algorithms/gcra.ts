import type { z } from 'zod';
import { benchedCpu, measuredBytes } from './costs.js';
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
import { tokenBucket } from './token-bucket.js';

/** GCRA parameters (validated); the same fields and defaults as the token bucket's. */
export interface GcraParams {
  /** Units admitted per `periodMs`: one every `T = periodMs / rate` ms (the emission interval). */
  readonly rate: number;
  readonly periodMs: number;
  /** The most units admitted at once; the tolerance is `burst × T`. */
  readonly burst: number;
}

/**
 * GCRA state: the theoretical arrival time, the instant at which the bucket would be full
 * again if nothing more arrived. Any `tatMs <= nowMs` means full.
 */
export interface GcraState {
  readonly tatMs: number;
}

/**
 * The token bucket's schema: GCRA is the same limiter, so a policy must be able to switch
 * between the two without touching its parameters.
 */
const paramsSchema: z.ZodType<GcraParams> = tokenBucket.paramsSchema;

/** Milliseconds `units` take on the timeline: units × T. Multiply first: keeps integers exact. */
function emissionMs(units: number, p: GcraParams): number {
  return (units * p.periodMs) / p.rate;
}

/** Units free when the TAT is `aheadMs` past now, within [0, burst]. */
function freeUnits(aheadMs: number, p: GcraParams): number {
  return Math.min(p.burst, Math.max(0, p.burst - (aheadMs * p.rate) / p.periodMs));
}

/**
 * How far beyond the tolerance a request may reach and still count as an exact fit.
 *
 * `FIT_EPSILON × T` is the token bucket's epsilon expressed in ms. It is not enough on its
 * own: `tatMs` is an absolute instant, and storing `tat + cost × T` rounds it to the double
 * grid at that magnitude (spacing 2^-12 ≈ 2.4e-4 ms for epoch ms in 2005–2039). The errors
 * of one burst add up in the same direction: with rate 7 per 1s, burst 7 and
 * `nowMs = 1.7e12`, six stored additions of 142.857… ms overshoot 857.142… ms by 2.1e-4 ms
 * and the seventh unit request would be denied. One burst stores at most `burst`
 * additions, each off by at most half a grid step, and `|x| × Number.EPSILON` is at least
 * one grid step.
 *
 * The slack never accumulates: an admitted request still advances the TAT by its whole
 * cost, so over any interval it admits at most `slackMs / T` extra units in total (4e-4
 * units for rate 100 per 1s and burst 20 at epoch ms).
 */
function slackMs(tatMs: number, p: GcraParams): number {
  return FIT_EPSILON * emissionMs(1, p) + (p.burst * Math.abs(tatMs) * Number.EPSILON) / 2;
}

function step(
  state: GcraState | undefined,
  nowMs: number,
  cost: number,
  p: GcraParams,
  next: Writable<GcraState>,
  out: DecisionCell,
): void {
  // An idle bucket's TAT lies in the past and it has been full since then: count from now.
  // Backwards time: max() keeps the later TAT, so nothing is ever given back.
  const tatMs = Math.max(state?.tatMs ?? nowMs, nowMs);
  // Unchanged unless admitted.
  next.tatMs = state?.tatMs ?? nowMs;
  // From here on, durations relative to now: the difference of two nearby instants is
  // exact, while arithmetic on absolute instants would round at their magnitude (the
  // textbook test `tat + cost × T − tolerance <= now` is off by up to 1e-4 ms at epoch ms).
  const aheadMs = tatMs - nowMs;
  if (cost > p.burst) {
    unfittable(out, p.burst, freeUnits(aheadMs, p), aheadMs);
    return;
  }

  const newAheadMs = aheadMs + emissionMs(cost, p);
  const overMs = newAheadMs - emissionMs(p.burst, p);
  // A peek (cost 0) only reads, so it is admitted even when time went back so far that
  // the TAT lies beyond the tolerance (overMs > 0); the token bucket admits it too.
  if (cost === 0 || overMs <= slackMs(tatMs, p)) {
    next.tatMs = tatMs + emissionMs(cost, p);
    decide(out, 'OK', p.burst, freeUnits(newAheadMs, p), 0, newAheadMs);
    return;
  }
  decide(out, 'OVER_LIMIT', p.burst, freeUnits(aheadMs, p), overMs, aheadMs);
}

/** The refund: the TAT moves back by `cost` units, never before now (a full bucket). */
function refund(s: GcraState, nowMs: number, cost: number, p: GcraParams): GcraState {
  return { tatMs: Math.max(nowMs, s.tatMs - emissionMs(cost, p)) };
}

/**
 * Settle (see `Algorithm.settle`): the TAT moves back by `estimate - actual` units (the
 * refund), or forward by the excess, to at most `(burst + maxDebt) × T` past now. A TAT
 * beyond the tolerance denies every cost until time has caught up with it.
 */
function settle(
  s: GcraState | undefined,
  nowMs: number,
  _reservedAtMs: number,
  estimate: number,
  actual: number,
  maxDebt: number,
  p: GcraParams,
): Settlement<GcraState> {
  const tatMs = Math.max(s?.tatMs ?? nowMs, nowMs);
  const delta = actual - estimate;
  let next = tatMs;
  let cappedUnits = 0;
  if (delta < 0) next = refund({ tatMs }, nowMs, -delta, p).tatMs;
  else if (delta > 0) {
    const wantedMs = tatMs + emissionMs(delta, p);
    // Never earlier than it was: a TAT already past the cap is not given anything.
    next = Math.max(tatMs, Math.min(wantedMs, nowMs + emissionMs(p.burst + maxDebt, p)));
    cappedUnits = ((wantedMs - next) * p.rate) / p.periodMs;
  }
  const aheadMs = next - nowMs;
  return {
    // Settled at the estimate: nothing to write.
    state: delta === 0 ? undefined : { tatMs: next },
    cappedUnits,
    debt: Math.max(0, (aheadMs * p.rate) / p.periodMs - p.burst),
    lifeMs: Math.ceil(aheadMs),
  };
}

const inPlace: InPlaceStep<GcraParams, GcraState> = {
  step,
  blank: () => ({ tatMs: 0 }),
  copy: (from, to) => {
    to.tatMs = from.tatMs;
  },
};

/**
 * GCRA (generic cell rate algorithm): the token bucket kept in one number. Each admitted
 * unit pushes the theoretical arrival time (TAT) forward by the emission interval
 * `T = periodMs / rate`; a request is admitted while its new TAT stays within the
 * tolerance `burst × T` of now. Admissions, `remaining`, `retryAfterMs` and
 * `resetAfterMs` equal the token bucket's for the same params and forward-moving time.
 *
 * Backwards time creates nothing (the TAT never decreases) but, with no "last seen"
 * instant in the state, it is judged against the earlier `nowMs`: the bucket looks
 * emptier and `retryAfterMs` counts from that earlier instant.
 *
 * Precision: the TAT is an absolute instant, so each admission stores it rounded to the
 * double grid at the clock's magnitude (up to 1.2e-4 ms at epoch ms, exact when `T` is a
 * whole number of ms). A decision can thus be off by `burst × 1.2e-4 ms / T` units after a
 * burst (6e-6 units for rate 7 per 1s, burst 7), and a long busy period runs at a rate
 * off by a relative 1.2e-4 ms / T. For emission intervals below about 1 ms prefer the
 * token bucket, whose state is relative.
 */
export const gcra: Algorithm<GcraParams, GcraState> = {
  kind: 'gcra',
  costs: {
    redisCpuUsPerDecision: benchedCpu(12.89, 'redis/c64/zipf/gcra/allow'),
    redisBytesPerBucket: measuredBytes(175, 'gcra'),
  },
  paramsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => Math.ceil(emissionMs(p.burst, p)),
  capacity: (p) => p.burst,
  inPlace,
  luaCode: 2,
  scriptParams: (p) => [p.rate, p.periodMs, p.burst, 0],
  refillPerMs: (p) => p.rate / p.periodMs,
  quota: (p) => ({ units: p.rate, windowMs: p.periodMs, burst: p.burst }),
  sustainedRate: (p) => ({ perSecond: (p.rate * 1_000) / p.periodMs, atOnce: p.burst }),
  refund: (s, nowMs, _consumedAtMs, cost, p) => refund(s, nowMs, cost, p),
  settle,
  hasBurst: true,
  paramsFor: (units, periodMs, burst) => ({ rate: units, period: periodMs, burst: burst ?? units }),
};
