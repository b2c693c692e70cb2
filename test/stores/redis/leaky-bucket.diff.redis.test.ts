/**
 * applyBatch.lua's leaky bucket (lua/algorithms/leakyBucket.lua) against
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
import { describeDifferential } from './differential.js';
import {
  applyOne,
  epochTraffic,
  expectBitIdenticalRun,
  expireAtMs,
  periodMsArb,
  rateArb,
  redisNowMs,
  requestFor,
  type DiffContext,
} from './diff-helpers.js';
import { readState, STATE_CODE } from '../../support/redis-state.js';
import { propertySeed } from '../../support/property-seed.js';

// ttlMs = capacity * periodMs / rate >= 2000ms (see describeDifferential)
const paramsArb = (mode: LeakyBucketMode): fc.Arbitrary<LeakyBucketParams> =>
  fc
    .record({
      rate: rateArb,
      periodMs: periodMsArb,
      capacity: fc.integer({ min: 1, max: 500 }),
      mode: fc.constant(mode),
    })
    .filter((p) => leakyBucket.ttlMs(p) >= 2_000);

const request = requestFor(leakyBucket);

/**
 * Sub-unit and backwards steps at epoch ms, and steps of exactly the last retryAfterMs or
 * delayMs (the instants where fitSlack decides): decisions, delayMs included, and the
 * stored state must be the same doubles as the TypeScript's.
 */
function bitIdentical(mode: LeakyBucketMode, ctx: DiffContext): void {
  it(`is bit-identical to the TypeScript transition at epoch ms, coming back at retry-after too (300 runs)`, async () => {
    const traffic = epochTraffic(
      paramsArb(mode),
      (p) => p.periodMs / p.rate,
      (p) => p.capacity,
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
        const key = `{lbits${mode}${++run}}:k`;
        await expectBitIdenticalRun(
          leakyBucket,
          ctx,
          { key, params, startMs, steps },
          (d) => d.delayMs ?? d.retryAfterMs,
          (stored) => (stored === null ? undefined : { level: stored[0], tsMs: stored[1] }),
        );
      }),
      { numRuns: 300, seed: propertySeed() },
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
          const decision = await applyOne(store(), request('{delay7}:k', params, cost), nowMs);
          expect(decision).toEqual(t.decision);
          expect([t.decision.allowed, 'delayMs' in decision]).toEqual([allowed, allowed]);
        }
        const [level, tsMs] = (await readState(
          redis(),
          'diff:{delay7}:k',
          STATE_CODE['leaky-bucket'],
        ))!;
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
        const nowMs = await redisNowMs(redis());
        await store().apply([request('{ttl}:k', params, 30)], { nowMs });
        await store().apply([request('{ttl}:k', params, 5)], { nowMs: nowMs + 1_500 });
        await store().apply([request('{ttl}:k', params, 10)], { nowMs: nowMs - 3_500 });
        const [level, tsMs] = (await readState(
          redis(),
          'diff:{ttl}:k',
          STATE_CODE['leaky-bucket'],
        ))!;
        expect(tsMs).toBe(nowMs + 1_500);
        const emptyAtMs = tsMs! + (level! * params.periodMs) / params.rate;
        expect(await expireAtMs(redis(), 'diff:{ttl}:k')).toBeGreaterThanOrEqual(emptyAtMs);
      });
    },
  );
});
