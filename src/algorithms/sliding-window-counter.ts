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
import { benchedCpu, measuredBytes } from './costs.js';
import { windowParamsSchema, type WindowParams } from './fixed-window.js';

/** Sliding window counter parameters (validated). */
export type SlidingWindowCounterParams = WindowParams;

/**
 * Sliding window counter state: units admitted in window number `window`
 * (`floor(nowMs / windowMs)`) and in the window before it.
 */
export interface SlidingWindowCounterState {
  readonly window: number;
  readonly current: number;
  readonly previous: number;
}

/**
 * Writes into `into` the state as of `nowWindow`: counts of windows that have passed move
 * back or drop out. `into` may be `state` itself.
 */
function rollTo(
  state: SlidingWindowCounterState | undefined,
  nowWindow: number,
  into: Writable<SlidingWindowCounterState>,
): void {
  if (state === undefined || nowWindow >= state.window + 2) {
    into.window = nowWindow;
    into.current = 0;
    into.previous = 0;
  } else if (nowWindow === state.window + 1) {
    into.previous = state.current;
    into.window = nowWindow;
    into.current = 0;
  } else {
    // Same window, or time went backwards into an earlier one: keep the state's window.
    into.window = state.window;
    into.current = state.current;
    into.previous = state.previous;
  }
}

/**
 * The instant a denied `cost` fits. The estimate only falls as time passes, along two
 * straight lines: `previous` decays through this window, then `current` (rolled over to
 * previous) decays through the next. `excess` is what must decay away on that line.
 * Multiplying before dividing keeps whole-ms answers exact.
 */
function fitsAtMs(
  s: SlidingWindowCounterState,
  cost: number,
  p: SlidingWindowCounterParams,
): number {
  const startMs = s.window * p.windowMs;
  if (s.current + cost <= p.limit) {
    // 0 < excess <= previous: otherwise the request would have fit, or needs the next window.
    const excess = s.previous + s.current + cost - p.limit;
    return startMs + (excess * p.windowMs) / s.previous;
  }
  // `current` alone is too much even with `previous` gone: wait into the next window.
  // 0 < excess <= current, since cost <= limit.
  const excess = s.current + cost - p.limit;
  return startMs + p.windowMs + (excess * p.windowMs) / s.current;
}

/**
 * The estimate of units in use at `nowMs` of a state already rolled to `nowMs`'s window
 * (or a later one, after backwards time).
 */
function estimate(
  s: SlidingWindowCounterState,
  nowMs: number,
  p: SlidingWindowCounterParams,
): number {
  // Before the state's window (backwards time) the fraction is 0, so `previous` keeps its
  // full weight and the estimate is at its largest: backwards time creates nothing.
  const elapsed = Math.min(1, Math.max(0, (nowMs - s.window * p.windowMs) / p.windowMs));
  return s.previous * (1 - elapsed) + s.current;
}

function fits(estimate: number, cost: number, p: SlidingWindowCounterParams): boolean {
  return estimate + cost <= p.limit + FIT_EPSILON;
}

/**
 * The wait from `nowMs` until a denied `cost` fits, such that asking again at exactly
 * `nowMs + wait` admits. `fitsAtMs` and the caller's sum are rounded doubles: near real
 * clock readings (~1.7e12 ms, about 2.4e-4 ms apart) landing a hair early leaves the
 * estimate over the limit by more than FIT_EPSILON (it falls only `previous / windowMs`
 * units per ms). Only then the wait grows by a few ulps of the instant (under 1 µs at
 * clock scale); whole-ms answers stay exact. That also keeps the wait positive when the
 * denial was by less than rounding noise.
 */
function retryAfterMs(
  s: SlidingWindowCounterState,
  nowMs: number,
  cost: number,
  p: SlidingWindowCounterParams,
): number {
  const atMs = fitsAtMs(s, cost, p);
  const waitMs = atMs - nowMs;
  if (waitMs > 0) {
    const later = blank();
    rollTo(s, Math.floor((nowMs + waitMs) / p.windowMs), later);
    if (fits(estimate(later, nowMs + waitMs, p), cost, p)) return waitMs;
  }
  return waitMs + 4 * Math.max(1, Math.abs(atMs), Math.abs(nowMs)) * Number.EPSILON;
}

/** Until the estimate reaches 0: `current` still has the next window to decay through. */
function resetAfterMs(
  s: SlidingWindowCounterState,
  current: number,
  nowMs: number,
  p: SlidingWindowCounterParams,
): number {
  const startMs = s.window * p.windowMs;
  if (current > 0) return startMs + 2 * p.windowMs - nowMs;
  return s.previous > 0 ? startMs + p.windowMs - nowMs : 0;
}

function blank(): Writable<SlidingWindowCounterState> {
  return { window: 0, current: 0, previous: 0 };
}

function step(
  state: SlidingWindowCounterState | undefined,
  nowMs: number,
  cost: number,
  p: SlidingWindowCounterParams,
  next: Writable<SlidingWindowCounterState>,
  out: DecisionCell,
): void {
  // `next` is the state rolled to now; an admission then adds to its current window.
  rollTo(state, Math.floor(nowMs / p.windowMs), next);
  const s = next;
  const used = estimate(s, nowMs, p);
  if (cost > p.limit) {
    unfittable(out, p.limit, Math.max(0, p.limit - used), resetAfterMs(s, s.current, nowMs, p));
    return;
  }
  if (fits(used, cost, p)) {
    const current = s.current + cost;
    decide(
      out,
      'OK',
      p.limit,
      Math.max(0, p.limit - used - cost),
      0,
      resetAfterMs(s, current, nowMs, p),
    );
    next.current = current;
    return;
  }
  decide(
    out,
    'OVER_LIMIT',
    p.limit,
    Math.max(0, p.limit - used),
    retryAfterMs(s, nowMs, cost, p),
    resetAfterMs(s, s.current, nowMs, p),
  );
}

/** The refund: from the window of `consumedAtMs`, or the one after it (where it is `previous`). */
function refund(
  s: SlidingWindowCounterState,
  consumedAtMs: number,
  cost: number,
  p: SlidingWindowCounterParams,
): SlidingWindowCounterState | undefined {
  const w = Math.floor(consumedAtMs / p.windowMs);
  if (s.window === w) return { ...s, current: Math.max(0, s.current - cost) };
  if (s.window === w + 1) return { ...s, previous: Math.max(0, s.previous - cost) };
  return undefined;
}

/**
 * Settle (see `Algorithm.settle`): `estimate - actual` comes back as the refund does; an
 * excess is added to the current window of `nowMs` while the estimate stays within
 * `limit + maxDebt`. An estimate past the limit denies until it has decayed below.
 */
function settle(
  s: SlidingWindowCounterState | undefined,
  nowMs: number,
  reservedAtMs: number,
  estimateUnits: number,
  actual: number,
  maxDebt: number,
  p: SlidingWindowCounterParams,
): Settlement<SlidingWindowCounterState> {
  const delta = actual - estimateUnits;
  let next: SlidingWindowCounterState | undefined;
  let cappedUnits = 0;
  if (delta < 0) next = s === undefined ? undefined : refund(s, reservedAtMs, -delta, p);
  else if (delta > 0) {
    const rolled = blank();
    rollTo(s, Math.floor(nowMs / p.windowMs), rolled);
    // Counts stay whole units: the room is floored (FIT_EPSILON against rounding).
    const room = Math.max(
      0,
      Math.floor(p.limit + maxDebt - estimate(rolled, nowMs, p) + FIT_EPSILON),
    );
    const charged = Math.min(delta, room);
    cappedUnits = delta - charged;
    next = { ...rolled, current: rolled.current + charged };
  }
  const held = next ?? s;
  if (held === undefined) return { state: undefined, cappedUnits, debt: 0, lifeMs: 0 };
  const now = blank();
  rollTo(held, Math.floor(nowMs / p.windowMs), now);
  return {
    state: next,
    cappedUnits,
    debt: Math.max(0, estimate(now, nowMs, p) - p.limit),
    lifeMs: Math.ceil(Math.max(0, (held.window + 2) * p.windowMs - nowMs)),
  };
}

const inPlace: InPlaceStep<SlidingWindowCounterParams, SlidingWindowCounterState> = {
  step,
  blank,
  copy: (from, to) => {
    to.window = from.window;
    to.current = from.current;
    to.previous = from.previous;
  },
};

/**
 * Sliding window counter: approximates a rolling window of `windowMs` with two counters.
 * The estimate at `nowMs` is `previous * (1 - f) + current`, where `f` is the fraction of
 * the current (epoch-aligned) window elapsed: the previous window's units are assumed
 * spread evenly and fade out linearly. A cost is admitted iff `estimate + cost <= limit`.
 *
 * Smooth at boundaries (no 2x burst) in constant memory. Units admitted within one
 * fixed window never exceed `limit`; over a rolling window it can admit more than `limit`
 * when the previous window's traffic was bunched at its end. `remaining` is fractional.
 */
export const slidingWindowCounter: Algorithm<
  SlidingWindowCounterParams,
  SlidingWindowCounterState
> = {
  kind: 'sliding-window-counter',
  costs: {
    redisCpuUsPerDecision: benchedCpu(17.45, 'redis/c64/zipf/swc/allow'),
    redisBytesPerBucket: measuredBytes(185, 'sliding-window-counter'),
  },
  paramsSchema: windowParamsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => 2 * p.windowMs,
  capacity: (p) => p.limit,
  inPlace,
  luaCode: 5,
  scriptParams: (p) => [p.limit, p.windowMs, 0, 0],
  refillPerMs: () => 0,
  quota: (p) => ({ units: p.limit, windowMs: p.windowMs }),
  sustainedRate: (p) => ({
    perSecond: (p.limit * 1_000) / p.windowMs,
    atOnce: p.limit,
    windowMs: p.windowMs,
  }),
  refund: (s, _nowMs, consumedAtMs, cost, p) => refund(s, consumedAtMs, cost, p),
  settle,
  hasBurst: false,
  paramsFor: (units, periodMs) => ({ limit: units, window: periodMs }),
};
