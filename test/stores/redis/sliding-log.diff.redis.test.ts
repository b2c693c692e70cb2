import fc from 'fast-check';
import { expect, it } from 'vitest';
import {
  slidingLog,
  type SlidingLogParams,
  type SlidingLogState,
} from '../../../src/algorithms/sliding-log.js';
import { describeDifferential, expectSameDecisions } from './differential.js';
import { applyOnOneKey, requestFor, windowParamsArb } from './diff-helpers.js';
import { propertySeed } from '../../support/property-seed.js';

// windowMs >= 2000 (see describeDifferential). limit stays far below the RedisStore's
// maxSlidingLogLimit (1000): every entry is a sorted-set member.
const paramsArb = windowParamsArb(200, [2_000, 60_000, 3_600_000], 100_000);

const request = requestFor(slidingLog);

describeDifferential(
  slidingLog,
  paramsArb,
  (p) => p.windowMs,
  ({ store, redis }) => {
    let runId = 0;

    it('leaves exactly the unexpired admitted entries in the sorted set, with PTTL until the newest stops counting, bit-identical waits (300 runs)', async () => {
      const traffic = paramsArb.chain((params) =>
        fc.record({
          params: fc.constant(params),
          startMs: fc.oneof(
            fc.constantFrom(1_000_000, 1_700_000_000_000.5),
            fc.double({ min: 0, max: 200_000, noNaN: true }),
          ),
          steps: fc.array(
            fc.record({
              dtMs: fc.oneof(
                fc.integer({ min: 0, max: Math.ceil(params.windowMs / 4) }),
                fc.constant(0),
                fc.integer({ min: -params.windowMs, max: -1 }),
                fc.double({ min: 0, max: 2 * params.windowMs, noNaN: true }),
              ),
              // Up to three requests on one key per batch: chained states, same stamps.
              costs: fc.array(fc.integer({ min: 0, max: Math.min(params.limit, 4) }), {
                minLength: 1,
                maxLength: 3,
              }),
            }),
            { minLength: 1, maxLength: 25 },
          ),
        }),
      );
      await fc.assert(
        fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
          const key = `{log${++runId}}:k`;
          const redisKey = store().redisKey(key);
          let state: SlidingLogState | undefined;
          let writtenAtMs = startMs;
          let nowMs = startMs;
          for (const step of steps) {
            nowMs += step.dtMs;
            const batch = step.costs.map((c) => request(key, params, c));
            const { r, want, ...applied } = await applyOnOneKey(store(), batch, state, nowMs);
            state = applied.state as SlidingLogState | undefined;
            if (applied.written) writtenAtMs = nowMs;
            expectSameDecisions(
              r,
              want.map((decision) => ({ ok: true as const, decision })),
            );
            // Stricter than the shared tolerance: the port does the same operations in the
            // same order (expiry = tMs + windowMs, then minus nowMs), so the same doubles.
            r.forEach((x, i) => {
              if (!x.ok) throw x.error;
              const w = want[i]!;
              expect(
                [x.decision.retryAfterMs, x.decision.resetAfterMs].map((v) => `${v}`),
                `item ${i} at ${nowMs}`,
              ).toEqual([w.retryAfterMs, w.resetAfterMs].map((v) => `${v}`));
            });
          }
          const entries = state?.entries ?? [];
          // The sorted set is the last written state: the entries still counting when it
          // was written, member for member (time as the score, cost in the member).
          expect(await redis().zcard(redisKey)).toBe(entries.length);
          const members = await redis().zrange(redisKey, 0, '-1', 'WITHSCORES');
          const got: [number, number][] = [];
          for (let i = 0; i < members.length; i += 2) {
            got.push([Number(members[i + 1]), Number(members[i]!.split(':')[1])]);
          }
          const byTime = (a: readonly [number, number], b: readonly [number, number]) =>
            a[0] - b[0] || a[1] - b[1];
          expect(got.sort(byTime)).toEqual(
            entries.map(([t, c]): [number, number] => [t, c]).sort(byTime),
          );
          const pttl = await redis().pttl(redisKey);
          if (entries.length === 0) {
            expect(pttl).toBe(-2);
          } else {
            // Until the newest entry's expiry, counted from the write (rounded up to whole ms).
            const untilMs = Math.ceil(entries.at(-1)![0] + params.windowMs - writtenAtMs);
            expect(pttl).toBeGreaterThan(untilMs - 1_000);
            expect(pttl).toBeLessThanOrEqual(untilMs);
          }
        }),
        { numRuns: 300, seed: propertySeed() },
      );
    });

    it('gives entries stamped at one instant distinct members, numbered in order', async () => {
      const params: SlidingLogParams = { limit: 10, windowMs: 10_000 };
      const t = 1_700_000_000_000.5;
      await store().apply([request('{logm}:k', params, 2), request('{logm}:k', params, 1)], {
        nowMs: t,
      });
      // Backwards time: stamped at the newest entry's instant, so it joins that group.
      await store().apply([request('{logm}:k', params, 3)], { nowMs: t - 5_000 });
      expect(await redis().zrange('diff:{logm}:k', 0, '-1')).toEqual([
        '1700000000000.5:1:1',
        '1700000000000.5:2:0',
        '1700000000000.5:3:2',
      ]);
      // A refused batch writes nothing.
      const refused = await store().apply(
        [request('{logm}:k', params, 2), request('{logm}:k', params, 9)],
        { nowMs: t },
      );
      expect(refused.map((r) => r.ok && r.decision.status)).toEqual(['OK', 'OVER_LIMIT']);
      expect(await redis().zcard('diff:{logm}:k')).toBe(3);
    });

    it('prunes the sorted set with the TypeScript expiry test (t + windowMs <= now), not t <= now - windowMs', async () => {
      // Doubles chosen so the two tests disagree: t + windowMs crosses 2^20 and rounds to
      // exactly now (so the entry has expired), while now - windowMs is an ulp below t.
      const params: SlidingLogParams = { limit: 5, windowMs: 60_000 };
      const t = 1_025_949.0494844668;
      const nowMs = 1_085_949.0494844667;
      expect(t + params.windowMs <= nowMs).toBe(true);
      expect(t <= nowMs - params.windowMs).toBe(false);
      await store().apply([request('{logp}:k', params, 1)], { nowMs: t });
      const [r] = await store().apply([request('{logp}:k', params, 1)], { nowMs });
      expect(r).toMatchObject({ ok: true, decision: { remaining: 4 } });
      expect(await redis().zrange('diff:{logp}:k', 0, '-1')).toEqual([`${nowMs}:1:0`]);
    });

    it('reports a key that is not a sliding log instead of overwriting it', async () => {
      const params: SlidingLogParams = { limit: 10, windowMs: 10_000 };
      await redis().set('diff:{logx}:str', 'hello');
      await redis().zadd('diff:{logx}:zset', 1, 'not-an-entry');
      // a score of inf, a cost of nan, a cost of 0: none is an entry Sluice wrote
      await redis().zadd('diff:{logx}:inf', 'inf', 'inf:1:0');
      await redis().zadd('diff:{logx}:nan', 1, '1:nan:0');
      await redis().zadd('diff:{logx}:zero', 1, '1:0:0');
      for (const key of ['{logx}:str', '{logx}:zset', '{logx}:inf', '{logx}:nan', '{logx}:zero']) {
        const [r] = await store().apply([request(key, params, 1)], { nowMs: 1_000_000 });
        expect(r).toMatchObject({ ok: false, error: { code: 'SLUICE_ERR_STORE_STATE_CORRUPT' } });
      }
      expect(await redis().get('diff:{logx}:str')).toBe('hello');
      expect(await redis().zrange('diff:{logx}:zset', 0, '-1')).toEqual(['not-an-entry']);
    });
  },
);
