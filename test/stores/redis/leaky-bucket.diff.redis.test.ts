/**
 * applyBatch.lua's leaky bucket (lua/includes/leakyBucket.lua) against
 * src/algorithms/leaky-bucket.ts, in both modes: generated sequences through
 * describeDifferential (which also checks that delayMs is present exactly when the
 * TypeScript returns it), then delay-mode answers at epoch ms and the key's expiry.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  leakyBucket,
  type LeakyBucketMode,
  type LeakyBucketParams,
  type LeakyBucketState,
} from '../../../src/algorithms/leaky-bucket.js';
import type { Redis } from 'ioredis';
import type { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest } from '../../../src/stores/store.js';
import { describeDifferential } from './differential.js';

// ttlMs = capacity * periodMs / rate >= 2000ms (see describeDifferential)
const paramsArb = (mode: LeakyBucketMode): fc.Arbitrary<LeakyBucketParams> =>
  fc
    .record({
      rate: fc.oneof(
        fc.integer({ min: 1, max: 1_000 }),
        fc.double({ min: 0.01, max: 100, noNaN: true }),
      ),
      periodMs: fc.constantFrom(1_000, 60_000, 3_600_000),
      capacity: fc.integer({ min: 1, max: 500 }),
      mode: fc.constant(mode),
    })
    .filter((p) => leakyBucket.ttlMs(p) >= 2_000);

const request = (key: string, params: LeakyBucketParams, cost: number): StoreRequest => ({
  key,
  algorithm: leakyBucket,
  params,
  cost,
  enforce: true,
});

/**
 * Sub-unit and backwards steps at epoch ms, and steps of exactly the last retryAfterMs or
 * delayMs (the instants where fitSlack decides): decisions, delayMs included, and the
 * stored state must be the same doubles as the TypeScript's.
 */
function bitIdentical(
  mode: LeakyBucketMode,
  ctx: { store: () => RedisStore; redis: () => Redis },
): void {
  it(`is bit-identical to the TypeScript transition at epoch ms, coming back at retry-after too (300 runs)`, async () => {
    const traffic = paramsArb(mode).chain((params) => {
      const unitMs = params.periodMs / params.rate;
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
              fc.double({ min: -2 * unitMs, max: 4 * unitMs, noNaN: true }),
            ),
            cost: fc.oneof(
              fc.integer({ min: 0, max: Math.min(params.capacity, 3) }),
              fc.constant(params.capacity),
            ),
          }),
          { minLength: 1, maxLength: 20 },
        ),
      });
    });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
        const key = `{lbits${mode}${++run}}:k`;
        let state: LeakyBucketState | undefined;
        let nowMs = startMs;
        let waitMs = 0;
        for (const { dtMs, cost } of steps) {
          nowMs += dtMs === 'wait' ? waitMs : dtMs;
          const t = leakyBucket.transition(state, nowMs, cost, params);
          if (t.decision.allowed && cost > 0) state = t.state;
          waitMs = t.decision.delayMs ?? t.decision.retryAfterMs;
          const [r] = await ctx.store().apply([request(key, params, cost)], { nowMs });
          if (!r!.ok) throw r!.error;
          expect(r!.decision).toEqual(t.decision);
          const stored = (await ctx.redis().get(`diff:${key}`))?.split(' ').map(Number);
          expect(stored && { level: stored[0], tsMs: stored[1] }).toEqual(state);
        }
      }),
      { numRuns: 300 },
    );
  });
}

describe('reject mode', () => {
  describeDifferential(
    leakyBucket,
    paramsArb('reject'),
    (p) => p.periodMs,
    (ctx) => bitIdentical('reject', ctx),
  );
});

describe('delay mode', () => {
  describeDifferential(
    leakyBucket,
    paramsArb('delay'),
    (p) => p.periodMs,
    ({ store, redis }) => {
      bitIdentical('delay', { store, redis });

      it('queues at epoch ms with bit-identical decisions and delays, none on denial (rate 7 per 1s)', async () => {
        // T = 1000/7 ms per unit; offsets from t0 round to the 2^-12ms grid at 1.7e12.
        const params: LeakyBucketParams = { rate: 7, periodMs: 1_000, capacity: 7, mode: 'delay' };
        const t0 = 1_700_000_000_000.5;
        const rows: [offsetMs: number, cost: number, allowed: boolean][] = [
          [0, 7, true], // fills the queue; delay 0 (nothing ahead)
          [0, 1, false], // full: denied, retry-after T, no delayMs
          // 4T later the leak rounds to 3.9999993 units, so 4 more land 7.3e-7 over the
          // capacity: inside fitSlack (5.3e-6), admitted and clamped to the capacity
          [4_000 / 7, 4, true],
          [4_000 / 7 - 400, 1, false], // time went back: the state keeps the later instant
          [4_000 / 7 + 500, 2, true], // 3.5 units leaked since; waits for the 3.5 ahead
        ];
        let state: LeakyBucketState | undefined;
        for (const [offsetMs, cost, allowed] of rows) {
          const nowMs = t0 + offsetMs;
          const t = leakyBucket.transition(state, nowMs, cost, params);
          if (t.decision.allowed) state = t.state;
          const [r] = await store().apply([request('{delay7}:k', params, cost)], { nowMs });
          if (!r!.ok) throw r!.error;
          expect(r!.decision).toEqual(t.decision);
          expect([t.decision.allowed, 'delayMs' in r!.decision]).toEqual([allowed, allowed]);
        }
        const [level, tsMs] = (await redis().get('diff:{delay7}:k'))!.split(' ').map(Number);
        expect({ level, tsMs }).toEqual(state);
      });

      it('keeps the key until the queue has leaked empty, counted from the state instant', async () => {
        // Client clock = the Redis clock read before the calls, so each SET happens at or
        // after its nowMs. After time went back 5s the state stays as of the later instant:
        // the key must live until that instant plus the level's leak time (ttl + lag).
        const params: LeakyBucketParams = {
          rate: 10,
          periodMs: 1_000,
          capacity: 30,
          mode: 'delay',
        };
        const [sec, usec] = (await redis().time()) as [number, number];
        const nowMs = Number(sec) * 1_000 + Math.floor(Number(usec) / 1_000);
        await store().apply([request('{ttl}:k', params, 30)], { nowMs });
        await store().apply([request('{ttl}:k', params, 5)], { nowMs: nowMs + 1_500 });
        await store().apply([request('{ttl}:k', params, 10)], { nowMs: nowMs - 3_500 });
        const [level, tsMs] = (await redis().get('diff:{ttl}:k'))!.split(' ').map(Number);
        expect(tsMs).toBe(nowMs + 1_500);
        const emptyAtMs = tsMs! + (level! * params.periodMs) / params.rate;
        const expireAtMs = Number(await redis().call('PEXPIRETIME', 'diff:{ttl}:k'));
        expect(expireAtMs).toBeGreaterThanOrEqual(emptyAtMs);
      });
    },
  );
});
