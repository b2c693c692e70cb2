/**
 * applyBatch.lua's GCRA (lua/algorithms/gcra.lua) against src/algorithms/gcra.ts: generated
 * sequences through describeDifferential, then the case the port exists to get right at
 * epoch ms (the TAT rounding that slackMs absorbs) and the key's expiry, which the
 * generated runs never see (their keys outlive them).
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { gcra, type GcraParams, type GcraState } from '../../../src/algorithms/gcra.js';
import { describeDifferential } from './differential.js';
import {
  applyOne,
  burstParamsArb,
  epochTraffic,
  expectBitIdenticalRun,
  expireAtMs,
  redisNowMs,
  requestFor,
} from './diff-helpers.js';
import { readState, STATE_CODE } from '../../support/redis-state.js';
import { propertySeed } from '../../support/property-seed.js';

// ttlMs = burst * periodMs / rate >= 2000ms (see describeDifferential). Fractional rates
// make the emission interval T = periodMs / rate a non-integer, so TATs round.
const paramsArb = burstParamsArb(gcra);

const request = requestFor(gcra);

describeDifferential(
  gcra,
  paramsArb,
  (p) => p.periodMs,
  ({ store, redis }) => {
    it('admits a whole burst at epoch ms with bit-identical decisions (rate 7 per 1s, T = 142.857…ms)', async () => {
      // Seven stored TATs round at 1.7e12 and overshoot 7T = 1000ms by ~2e-4ms; the 7th
      // unit fits only through slackMs, the 8th is T over. Same doubles, same answers.
      const params: GcraParams = { rate: 7, periodMs: 1_000, burst: 7 };
      const nowMs = 1_700_000_000_000;
      let state: GcraState | undefined;
      for (let i = 0; i < 8; i++) {
        const t = gcra.transition(state, nowMs, 1, params);
        if (t.decision.allowed) state = t.state;
        expect(await applyOne(store(), request('{epoch7}:k', params, 1), nowMs)).toEqual(
          t.decision,
        );
        expect(t.decision.allowed).toBe(i < 7);
      }
      expect(await readState(redis(), 'diff:{epoch7}:k', STATE_CODE.gcra)).toEqual([state!.tatMs]);
    });

    it('is bit-identical to the TypeScript transition at epoch ms, coming back at retry-after too (300 runs)', async () => {
      // Sub-T and backwards steps, and steps of exactly the last retryAfterMs: the instants
      // where slackMs decides. Decisions and the stored TAT must be the same doubles.
      const traffic = epochTraffic(
        paramsArb,
        (p) => p.periodMs / p.rate,
        (p) => p.burst,
      );
      let run = 0;
      await fc.assert(
        fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
          const key = `{gbits${++run}}:k`;
          await expectBitIdenticalRun(
            gcra,
            { store, redis },
            { key, params, startMs, steps },
            (d) => d.retryAfterMs,
            (stored) => (stored === null ? undefined : { tatMs: stored[0] }),
          );
        }),
        { numRuns: 300, seed: propertySeed() },
      );
    });

    it('keeps the key until its TAT, also where the fit slack pushes the TAT past ttlMs', async () => {
      // A state with tat <= now decides like a fresh one, so the key must live until the TAT,
      // and no longer is needed. Admitted costs keep tat - now <= ttlMs + slackMs.
      const burst = async (key: string, params: GcraParams, nowMs: number) => {
        for (let i = 0; i < 8; i++) await store().apply([request(key, params, 1)], { nowMs });
        const tatMs = (await readState(redis(), `diff:${key}`, STATE_CODE.gcra))![0]!;
        return { aheadMs: tatMs - nowMs, tatMs, pttl: await redis().pttl(`diff:${key}`) };
      };
      // Rate 5 per 1s (T = 200ms, ttlMs 1000) at 2^60ms, where doubles are 256ms apart: each
      // +200ms stores +256ms and six units fit within the slack (~640ms), leaving the TAT
      // 1536ms ahead; the key lives that long, not ttlMs.
      const far = await burst('{far}:k', { rate: 5, periodMs: 1_000, burst: 5 }, 2 ** 60);
      expect(far.aheadMs).toBe(1_536);
      expect(far.pttl).toBeGreaterThan(1_536 - 100);
      expect(far.pttl).toBeLessThanOrEqual(1_536);
      // Rate 7 at epoch ms, the Redis clock as client clock (read before the calls, so every
      // SET happens at or after nowMs): the TAT lands ~2e-4ms past nowMs + ttlMs and the key
      // must not expire before it. Nor much later: ceil(tat - now), not ttl + lag (2000ms).
      const nowMs = await redisNowMs(redis());
      const epoch = await burst('{epoch}:k', { rate: 7, periodMs: 1_000, burst: 7 }, nowMs);
      expect(epoch.aheadMs).toBeGreaterThan(1_000);
      expect(await expireAtMs(redis(), 'diff:{epoch}:k')).toBeGreaterThanOrEqual(epoch.tatMs);
      expect(epoch.pttl).toBeLessThanOrEqual(1_001);
    });
  },
);
