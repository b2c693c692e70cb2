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

describe('reject mode', () => {
  describeDifferential(leakyBucket, paramsArb('reject'), (p) => p.periodMs);
});

describe('delay mode', () => {
  describeDifferential(
    leakyBucket,
    paramsArb('delay'),
    (p) => p.periodMs,
    ({ store, redis }) => {
      const request = (key: string, params: LeakyBucketParams, cost: number): StoreRequest => ({
        key,
        algorithm: leakyBucket,
        params,
        cost,
        enforce: true,
      });

      it('queues a burst at epoch ms with bit-identical delays, and none on denial (rate 7 per 1s)', async () => {
        // Each admitted unit waits for the level ahead of it to leak: k * 142.857…ms.
        const params: LeakyBucketParams = { rate: 7, periodMs: 1_000, capacity: 7, mode: 'delay' };
        let nowMs = 1_700_000_000_000.5;
        let state: LeakyBucketState | undefined;
        for (const [dtMs, cost] of [
          [0, 1],
          [0, 2],
          [50.25, 3],
          [0, 3],
          [-400, 1],
          [900, 2],
        ]) {
          nowMs += dtMs!;
          const t = leakyBucket.transition(state, nowMs, cost!, params);
          if (t.decision.allowed) state = t.state;
          const [r] = await store().apply([request('{delay7}:k', params, cost!)], { nowMs });
          if (!r!.ok) throw r!.error;
          expect(r!.decision).toEqual(t.decision);
          expect('delayMs' in r!.decision).toBe(t.decision.allowed);
        }
      });

      it('keeps the key until the queue has leaked empty, counted from the state instant', async () => {
        // After time went back 5s, the state stays as of the later instant: the key must
        // live until that instant plus the leak time of the level, ttl + lag from now.
        const params: LeakyBucketParams = {
          rate: 10,
          periodMs: 1_000,
          capacity: 30,
          mode: 'delay',
        };
        const [sec, usec] = (await redis().time()) as [number, number];
        const nowMs = Number(sec) * 1_000 + Math.floor(Number(usec) / 1_000);
        await store().apply([request('{ttl}:k', params, 30)], { nowMs });
        await store().apply([request('{ttl}:k', params, 0)], { nowMs: nowMs + 1_500 });
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
