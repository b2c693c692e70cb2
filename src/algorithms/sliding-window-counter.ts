import { FIT_EPSILON, unfittable, type Algorithm, type Transition } from './algorithm.js';
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

/** The state as of `nowWindow`: counts of windows that have passed move back or drop out. */
function rollTo(
  state: SlidingWindowCounterState | undefined,
  nowWindow: number,
): SlidingWindowCounterState {
  if (state === undefined || nowWindow >= state.window + 2) {
    return { window: nowWindow, current: 0, previous: 0 };
  }
  if (nowWindow === state.window + 1) {
    return { window: nowWindow, current: 0, previous: state.current };
  }
  // Same window, or time went backwards into an earlier one: keep the state's window.
  return state;
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

/** The state rolled to `nowMs`'s window, and the estimate of units in use at `nowMs`. */
function observe(
  state: SlidingWindowCounterState | undefined,
  nowMs: number,
  p: SlidingWindowCounterParams,
): { readonly s: SlidingWindowCounterState; readonly estimate: number } {
  const s = rollTo(state, Math.floor(nowMs / p.windowMs));
  // Before the state's window (backwards time) the fraction is 0, so `previous` keeps its
  // full weight and the estimate is at its largest: backwards time creates nothing.
  const elapsed = Math.min(1, Math.max(0, (nowMs - s.window * p.windowMs) / p.windowMs));
  return { s, estimate: s.previous * (1 - elapsed) + s.current };
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
  if (waitMs > 0 && fits(observe(s, nowMs + waitMs, p).estimate, cost, p)) return waitMs;
  return waitMs + 4 * Math.max(1, Math.abs(atMs), Math.abs(nowMs)) * Number.EPSILON;
}

function transition(
  state: SlidingWindowCounterState | undefined,
  nowMs: number,
  cost: number,
  p: SlidingWindowCounterParams,
): Transition<SlidingWindowCounterState> {
  const { s, estimate } = observe(state, nowMs, p);
  const startMs = s.window * p.windowMs;
  // Until the estimate reaches 0: `current` still has the next window to decay through.
  const resetAfterMs = (current: number): number =>
    current > 0
      ? startMs + 2 * p.windowMs - nowMs
      : s.previous > 0
        ? startMs + p.windowMs - nowMs
        : 0;

  if (cost > p.limit) return unfittable(s, p.limit, Math.max(0, p.limit - estimate));
  if (fits(estimate, cost, p)) {
    const current = s.current + cost;
    return {
      state: { window: s.window, current, previous: s.previous },
      decision: {
        status: 'OK',
        allowed: true,
        limit: p.limit,
        remaining: Math.max(0, p.limit - estimate - cost),
        retryAfterMs: 0,
        resetAfterMs: resetAfterMs(current),
      },
    };
  }
  return {
    state: s,
    decision: {
      status: 'OVER_LIMIT',
      allowed: false,
      limit: p.limit,
      remaining: Math.max(0, p.limit - estimate),
      retryAfterMs: retryAfterMs(s, nowMs, cost, p),
      resetAfterMs: resetAfterMs(s.current),
    },
  };
}

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
  paramsSchema: windowParamsSchema,
  transition,
  ttlMs: (p) => 2 * p.windowMs,
  capacity: (p) => p.limit,
};
