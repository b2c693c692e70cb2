/**
 * Helpers shared by the `<algorithm>.diff.redis.test.ts` suites: params arbitraries, one
 * request, the Redis clock, and the bit-identical checks against the TypeScript transition.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Redis } from 'ioredis';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import type { WindowParams } from '../../../src/algorithms/fixed-window.js';
import type { AlgorithmDecision } from '../../../src/core/decision.js';
import { decideBatch } from '../../../src/stores/batch.js';
import type { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { readState } from '../../support/redis-state.js';

/** What describeDifferential's `extra` receives. */
export interface DiffContext {
  store: () => RedisStore;
  redis: () => Redis;
}

/** Rates of the bucket algorithms: whole and fractional (so intervals round). */
export const rateArb: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: 1, max: 1_000 }),
  fc.double({ min: 0.01, max: 100, noNaN: true }),
);

/** Periods of the bucket algorithms. */
export const periodMsArb: fc.Arbitrary<number> = fc.constantFrom(1_000, 60_000, 3_600_000);

/**
 * Params `{ rate, periodMs, burst }` (token bucket, GCRA) with
 * ttlMs = burst * periodMs / rate >= 2000ms (see describeDifferential).
 */
export function burstParamsArb<P extends { rate: number; periodMs: number; burst: number }>(
  alg: Algorithm<P, unknown>,
): fc.Arbitrary<P> {
  return fc
    .record({ rate: rateArb, periodMs: periodMsArb, burst: fc.integer({ min: 1, max: 500 }) })
    .filter((p) => alg.ttlMs(p as P) >= 2_000) as fc.Arbitrary<P>;
}

/**
 * Window params: limits often small (up to 10), else up to `maxLimit`; windows from
 * `windowsMs` (the first is the shortest) or any whole length up to `maxWindowMs`.
 */
export function windowParamsArb(
  maxLimit: number,
  windowsMs: readonly [number, ...number[]],
  maxWindowMs: number,
): fc.Arbitrary<WindowParams> {
  return fc.record({
    limit: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: maxLimit })),
    windowMs: fc.oneof(
      fc.constantFrom(...windowsMs),
      fc.integer({ min: windowsMs[0], max: maxWindowMs }),
    ),
  });
}

/** A request factory for `alg`: (key, params, cost, enforce = true). */
export function requestFor<P>(alg: Algorithm<P, unknown>) {
  return (key: string, params: P, cost: number, enforce = true): StoreRequest => ({
    key,
    algorithm: alg as Algorithm<unknown, unknown>,
    params,
    cost,
    enforce,
  });
}

/** The Redis server clock in whole ms (TIME has microseconds). */
export async function redisNowMs(redis: Redis): Promise<number> {
  const [sec, usec] = (await redis.time()) as [number, number];
  return Number(sec) * 1_000 + Math.floor(Number(usec) / 1_000);
}

/** The instant a key expires, in ms (PEXPIRETIME). */
export async function expireAtMs(redis: Redis, key: string): Promise<number> {
  return Number(await redis.call('PEXPIRETIME', key));
}

/** Applies one request and returns its decision; a store error is thrown. */
export async function applyOne(
  store: RedisStore,
  request: StoreRequest,
  nowMs: number,
): Promise<AlgorithmDecision> {
  const [r] = await store.apply([request], { nowMs });
  if (!r!.ok) throw r!.error;
  return r!.decision;
}

/** A step of `epochTraffic`: move time by dtMs, or by the last wait ('wait'), then ask. */
export interface EpochStep {
  readonly dtMs: number | 'wait';
  readonly cost: number;
}

/**
 * Sub-unit and backwards steps at epoch ms, and steps of exactly the last wait (the
 * instants where the fit slack decides). `unitMs` is one unit's interval, `capacity` the
 * largest cost.
 */
export function epochTraffic<P>(
  paramsArb: fc.Arbitrary<P>,
  unitMs: (p: P) => number,
  capacity: (p: P) => number,
): fc.Arbitrary<{ params: P; startMs: number; steps: EpochStep[] }> {
  return paramsArb.chain((params) => {
    const u = unitMs(params);
    const cap = capacity(params);
    return fc.record({
      params: fc.constant(params),
      startMs: fc.oneof(
        fc.constant(1_700_000_000_000.5),
        fc.double({ min: 1.6e12, max: 1.8e12, noNaN: true }),
      ),
      steps: fc.array(
        fc.record({
          dtMs: fc.oneof(
            fc.constant('wait' as const),
            fc.constant(0),
            fc.double({ min: -2 * u, max: 4 * u, noNaN: true }),
          ),
          cost: fc.oneof(fc.integer({ min: 0, max: Math.min(cap, 3) }), fc.constant(cap)),
        }),
        { minLength: 1, maxLength: 20 },
      ),
    });
  });
}

/**
 * Replays `steps` on one key through the store and the TypeScript transition: every
 * decision must be the same doubles, and the stored value (read back with `decode`) the
 * TypeScript state. A 'wait' step moves time by `waitMs` of the previous decision.
 */
export async function expectBitIdenticalRun<P, S>(
  alg: Algorithm<P, S>,
  ctx: DiffContext,
  run: { key: string; params: P; startMs: number; steps: readonly EpochStep[] },
  waitMs: (d: AlgorithmDecision) => number,
  decode: (stored: number[] | null) => unknown,
): Promise<void> {
  const { key, params, startMs, steps } = run;
  const request = requestFor(alg);
  let state: S | undefined;
  let nowMs = startMs;
  let lastWaitMs = 0;
  for (const { dtMs, cost } of steps) {
    nowMs += dtMs === 'wait' ? lastWaitMs : dtMs;
    const t = alg.transition(state, nowMs, cost, params);
    if (t.decision.allowed && cost > 0) state = t.state;
    lastWaitMs = waitMs(t.decision);
    const decision = await applyOne(ctx.store(), request(key, params, cost), nowMs);
    expect(decision).toEqual(t.decision);
    expect(decode(await readState(ctx.redis(), `diff:${key}`, alg.luaCode))).toEqual(state);
  }
}

/**
 * One batch on one key through the store and through decideBatch from `state`: the
 * store's results, the reference decisions, and the state after (undefined in `written`
 * when nothing was written).
 */
export async function applyOnOneKey(
  store: RedisStore,
  batch: StoreRequest[],
  state: unknown,
  nowMs: number,
): Promise<{
  r: readonly StoreResult[];
  want: readonly AlgorithmDecision[];
  state: unknown;
  written: boolean;
}> {
  const r = await store.apply(batch, { nowMs });
  const outcome = decideBatch(
    batch,
    batch.map(() => state),
    nowMs,
  );
  let written = false;
  outcome.writes.forEach((w) => {
    if (w === undefined) return;
    state = w;
    written = true;
  });
  return { r, want: outcome.decisions, state, written };
}

/** The numbers of a decision as exact text (%.17g and JavaScript both round-trip). */
const bits = (d: { remaining: number; retryAfterMs: number; resetAfterMs: number }) =>
  [d.remaining, d.retryAfterMs, d.resetAfterMs].map((x) => `${x}`);

/** Every store result is the reference decision's status and the same doubles. */
export function expectSameBits(
  r: readonly StoreResult[],
  want: readonly AlgorithmDecision[],
  message?: (i: number) => string,
): void {
  r.forEach((x, i) => {
    if (!x.ok) throw x.error;
    const w = want[i]!;
    expect([x.decision.status, ...bits(x.decision)], message?.(i)).toEqual([w.status, ...bits(w)]);
  });
}
