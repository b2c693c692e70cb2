/**
 * applyBatch.lua's GCRA (lua/includes/gcra.lua) against src/algorithms/gcra.ts: generated
 * sequences through describeDifferential, then the case the port exists to get right at
 * epoch ms (the TAT rounding that slackMs absorbs) and the key's expiry.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { gcra, type GcraParams, type GcraState } from '../../../src/algorithms/gcra.js';
import type { StoreRequest } from '../../../src/stores/store.js';
import { describeDifferential } from './differential.js';

// ttlMs = burst * periodMs / rate >= 2000ms (see describeDifferential). Fractional rates
// make the emission interval T = periodMs / rate a non-integer, so TATs round.
const paramsArb: fc.Arbitrary<GcraParams> = fc
  .record({
    rate: fc.oneof(
      fc.integer({ min: 1, max: 1_000 }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
    ),
    periodMs: fc.constantFrom(1_000, 60_000, 3_600_000),
    burst: fc.integer({ min: 1, max: 500 }),
  })
  .filter((p) => gcra.ttlMs(p) >= 2_000);

describeDifferential(
  gcra,
  paramsArb,
  (p) => p.periodMs,
  ({ store, redis }) => {
    const request = (key: string, params: GcraParams, cost: number): StoreRequest => ({
      key,
      algorithm: gcra,
      params,
      cost,
      enforce: true,
    });

    it('admits a whole burst at epoch ms with bit-identical decisions (rate 7 per 1s, T = 142.857…ms)', async () => {
      // Seven stored TATs round at 1.7e12 and overshoot 7T = 1000ms by ~2e-4ms; the 7th
      // unit fits only through slackMs, the 8th is T over. Same doubles, same answers.
      const params: GcraParams = { rate: 7, periodMs: 1_000, burst: 7 };
      const nowMs = 1_700_000_000_000;
      let state: GcraState | undefined;
      for (let i = 0; i < 8; i++) {
        const t = gcra.transition(state, nowMs, 1, params);
        if (t.decision.allowed) state = t.state;
        const [r] = await store().apply([request('{epoch7}:k', params, 1)], { nowMs });
        if (!r!.ok) throw r!.error;
        expect(r!.decision).toEqual(t.decision);
        expect(t.decision.allowed).toBe(i < 7);
      }
      expect(Number(await redis().get('diff:{epoch7}:k'))).toBe(state!.tatMs);
    });

    it('keeps the key until its TAT at least, and no shorter than ttlMs', async () => {
      // Client clock = the Redis clock read before the call, so the SET happens at or after
      // nowMs: an expiry instant >= tatMs means the key outlives every state that differs
      // from a fresh one (tat <= now decides like fresh). Rate 7 at epoch ms puts the TAT
      // ~2e-4ms past nowMs + ttlMs (1000ms), which ttlMs alone would cut short.
      const params: GcraParams = { rate: 7, periodMs: 1_000, burst: 7 };
      const [sec, usec] = (await redis().time()) as [number, number];
      const nowMs = Number(sec) * 1_000 + Math.floor(Number(usec) / 1_000);
      for (let i = 0; i < 7; i++) await store().apply([request('{ttl7}:k', params, 1)], { nowMs });
      const tatMs = Number(await redis().get('diff:{ttl7}:k'));
      expect(tatMs).toBeGreaterThan(nowMs + gcra.ttlMs(params));
      const expireAtMs = Number(await redis().call('PEXPIRETIME', 'diff:{ttl7}:k'));
      expect(expireAtMs).toBeGreaterThanOrEqual(tatMs);
      // ...but not the token bucket's ttl + lag: at most ceil(tat - now) past the SET
      expect(expireAtMs).toBeLessThanOrEqual(Date.now() + gcra.ttlMs(params) + 1);
    });
  },
);
