import { z } from 'zod';
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
import { capacityUnits, durationMs, positiveRate } from './params.js';

/** Token bucket parameters (validated). */
export interface TokenBucketParams {
  /** Tokens added per `periodMs`. */
  readonly rate: number;
  readonly periodMs: number;
  /** Bucket capacity: the most units admitted at once. */
  readonly burst: number;
}

/** Token bucket state: tokens held (fractional) as of `tsMs`. */
export interface TokenBucketState {
  readonly tokens: number;
  readonly tsMs: number;
}

const paramsSchema = z
  .object({
    /** Units added per period, e.g. 100. */
    rate: positiveRate,
    /** The period `rate` is counted over. @default "1s" */
    period: durationMs.default(1_000),
    /** Capacity. @default ceil(rate) */
    burst: capacityUnits.optional(),
  })
  .strict()
  .transform((p): TokenBucketParams => ({
    rate: p.rate,
    periodMs: p.period,
    burst: p.burst ?? Math.max(1, Math.ceil(p.rate)),
  }));

/** Milliseconds to refill `units` tokens. Multiply first: keeps integer inputs exact. */
function refillMs(units: number, p: TokenBucketParams): number {
  return (units * p.periodMs) / p.rate;
}

/**
 * Tolerance in tokens for "does the cost fit": FIT_EPSILON plus what one rounding step of
 * an epoch-ms timestamp (about 2.4e-4 ms at 1.7e12) refills. Without the second part, a
 * caller that comes back exactly at `nowMs + retryAfterMs` can be denied by rounding.
 */
function fitSlack(tsMs: number, p: TokenBucketParams): number {
  return FIT_EPSILON + (2 * Math.abs(tsMs) * Number.EPSILON * p.rate) / p.periodMs;
}

function step(
  state: TokenBucketState | undefined,
  nowMs: number,
  cost: number,
  p: TokenBucketParams,
  next: Writable<TokenBucketState>,
  out: DecisionCell,
): void {
  let tokens: number;
  let tsMs: number;
  if (state === undefined) {
    tokens = p.burst;
    tsMs = nowMs;
  } else {
    // Backwards time: elapsed is 0 and tsMs keeps the later instant, so the same
    // interval is never refilled twice.
    const elapsedMs = Math.max(0, nowMs - state.tsMs);
    tokens = Math.min(p.burst, state.tokens + (elapsedMs * p.rate) / p.periodMs);
    tsMs = Math.max(state.tsMs, nowMs);
  }
  next.tsMs = tsMs;
  if (cost > p.burst) {
    next.tokens = tokens;
    unfittable(out, p.burst, Math.max(0, tokens), tsMs - nowMs + refillMs(p.burst - tokens, p));
    return;
  }
  // The state is as of tsMs, which is later than nowMs when time went backwards: waits
  // start from there, or a caller would be told to come back before tokens exist.
  const lagMs = tsMs - nowMs;
  if (tokens + fitSlack(tsMs, p) >= cost) {
    const left = Math.max(0, tokens - cost);
    next.tokens = left;
    decide(out, 'OK', p.burst, left, 0, lagMs + refillMs(p.burst - left, p));
    return;
  }
  next.tokens = tokens;
  // Below zero only after a settle charged a debt (see `settle`): none is left to report.
  decide(
    out,
    'OVER_LIMIT',
    p.burst,
    Math.max(0, tokens),
    lagMs + refillMs(cost - tokens, p),
    lagMs + refillMs(p.burst - tokens, p),
  );
}

/** The state refilled to `nowMs` (a fresh bucket when there is none). */
function refilled(s: TokenBucketState | undefined, nowMs: number, p: TokenBucketParams) {
  if (s === undefined) return { tokens: p.burst, tsMs: nowMs };
  // Refill first, so a give-back cannot push the bucket past its burst.
  const elapsedMs = Math.max(0, nowMs - s.tsMs);
  const tokens = Math.min(p.burst, s.tokens + (elapsedMs * p.rate) / p.periodMs);
  return { tokens, tsMs: Math.max(s.tsMs, nowMs) };
}

/**
 * Settle (see `Algorithm.settle`): refill to `nowMs`, then give back `estimate - actual`
 * (capped at the burst) or take the excess, down to `-maxDebt` tokens at most. Negative
 * tokens deny every cost until the refill has repaid them.
 */
function settle(
  s: TokenBucketState | undefined,
  nowMs: number,
  _reservedAtMs: number,
  estimate: number,
  actual: number,
  maxDebt: number,
  p: TokenBucketParams,
): Settlement<TokenBucketState> {
  const at = refilled(s, nowMs, p);
  const delta = actual - estimate;
  let tokens = at.tokens;
  let cappedUnits = 0;
  if (delta < 0) tokens = Math.min(p.burst, tokens - delta);
  else if (delta > 0) {
    const wanted = tokens - delta;
    // Never above what it had: a bucket already past the cap is not given anything.
    tokens = Math.min(tokens, Math.max(-maxDebt, wanted));
    cappedUnits = tokens - wanted;
  }
  const lagMs = at.tsMs - nowMs;
  return {
    // Settled at the estimate: nothing to write.
    state: delta === 0 ? undefined : { tokens, tsMs: at.tsMs },
    cappedUnits,
    debt: Math.max(0, -tokens),
    lifeMs: Math.ceil(lagMs + refillMs(p.burst - tokens, p)),
  };
}

const inPlace: InPlaceStep<TokenBucketParams, TokenBucketState> = {
  step,
  blank: () => ({ tokens: 0, tsMs: 0 }),
  copy: (from, to) => {
    to.tokens = from.tokens;
    to.tsMs = from.tsMs;
  },
};

/**
 * Token bucket: `burst` tokens at most, refilled continuously at `rate` per `periodMs`;
 * a request takes `cost` tokens or is denied. Exact rate, explicit burst, no boundary
 * burst. The default algorithm.
 */
export const tokenBucket: Algorithm<TokenBucketParams, TokenBucketState> = {
  kind: 'token-bucket',
  costs: {
    redisCpuUsPerDecision: benchedCpu(14.25, 'redis/c64/zipf/tb/allow'),
    redisBytesPerBucket: measuredBytes(187, 'token-bucket'),
  },
  paramsSchema,
  transition: pureTransition(inPlace),
  ttlMs: (p) => Math.ceil(refillMs(p.burst, p)),
  capacity: (p) => p.burst,
  inPlace,
  luaCode: 1,
  scriptParams: (p) => [p.rate, p.periodMs, p.burst, 0],
  refillPerMs: (p) => p.rate / p.periodMs,
  quota: (p) => ({ units: p.rate, windowMs: p.periodMs, burst: p.burst }),
  sustainedRate: (p) => ({ perSecond: (p.rate * 1_000) / p.periodMs, atOnce: p.burst }),
  refund: (s, nowMs, _consumedAtMs, cost, p) => {
    const at = refilled(s, nowMs, p);
    return { tokens: Math.min(p.burst, at.tokens + cost), tsMs: at.tsMs };
  },
  settle,
  hasBurst: true,
  paramsFor: (units, periodMs, burst) => ({ rate: units, period: periodMs, burst: burst ?? units }),
};
