import fc from 'fast-check';
import { expect, it } from 'vitest';
import {
  slidingWindowCounter,
  type SlidingWindowCounterParams,
} from '../../../src/algorithms/sliding-window-counter.js';
import { describeDifferential } from './differential.js';
import { applyOnOneKey, expectSameBits, requestFor, windowParamsArb } from './diff-helpers.js';
import { readState, STATE_CODE } from '../../support/redis-state.js';
import { propertySeed } from '../../support/property-seed.js';

// windowMs >= 2000 (see describeDifferential); odd lengths make the decay fractions and
// retry-after instants unround, which exercises the ulp nudge at epoch-ms scale.
const paramsArb = windowParamsArb(1_000, [2_000, 60_000, 3_600_000], 100_000);

const request = requestFor(slidingWindowCounter);

describeDifferential(
  slidingWindowCounter,
  paramsArb,
  (p) => p.windowMs,
  ({ store, redis }) => {
    let runId = 0;

    // The shared tolerance (1e-9, or 12 digits) cannot see a reordered sum or quotient: it
    // changes a result by an ulp or so. The port does the same operations in the same
    // order, so every number must be the same double. Small limits make denials (and so
    // fitsAt and the ulp nudge) common; starts just below 2^20 make sums cross a binade.
    // (Numbers travel as packed doubles, exact.)
    it('is bit-identical to the TypeScript transition, retry-after nudge included (500 runs)', async () => {
      const traffic = fc
        .record({
          limit: fc.integer({ min: 1, max: 20 }),
          windowMs: fc.oneof(fc.constant(2_000), fc.integer({ min: 2_000, max: 100_000 })),
        })
        .chain((params) =>
          fc.record({
            params: fc.constant(params),
            startMs: fc.oneof(
              fc.constantFrom(1_000_000, 1_048_575.75, 1_700_000_000_000.5),
              fc.double({ min: 1_000_000, max: 1_100_000, noNaN: true }),
              // Near 0 the window start adds no rounding of its own, so fitsAt's quotient
              // shows bit for bit.
              fc.double({ min: 0, max: 200_000, noNaN: true }),
            ),
            steps: fc.array(
              fc.record({
                dtMs: fc.oneof(
                  fc.double({ min: 0, max: params.windowMs, noNaN: true }),
                  fc.integer({ min: 0, max: params.windowMs }),
                  fc.integer({ min: -params.windowMs, max: -1 }),
                  fc.constant(0),
                ),
                items: fc.array(
                  fc.record({
                    cost: fc.integer({ min: 0, max: params.limit }),
                    enforce: fc.boolean(),
                  }),
                  { minLength: 1, maxLength: 3 },
                ),
              }),
              { minLength: 1, maxLength: 30 },
            ),
          }),
        );
      await fc.assert(
        fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
          const key = `{swcbits${++runId}}:k`;
          let state: unknown;
          let nowMs = startMs;
          for (const step of steps) {
            nowMs += step.dtMs;
            const batch = step.items.map((it) => request(key, params, it.cost, it.enforce));
            const applied = await applyOnOneKey(store(), batch, state, nowMs);
            state = applied.state;
            expectSameBits(applied.r, applied.want);
          }
        }),
        { numRuns: 500, seed: propertySeed() },
      );
    });

    it('keeps a key until its state rolls out to a fresh one (two windows from its own)', async () => {
      const params: SlidingWindowCounterParams = { limit: 4, windowMs: 10_000 };
      // now = window 170_000_001 + 2_500.25ms: 17_499.75ms until window + 2 begins.
      const nowMs = 1_700_000_012_500.25;
      const [r] = await store().apply([request('{swcx}:a', params, 3)], { nowMs });
      expect(r).toMatchObject({ ok: true, decision: { remaining: 1 } });
      expect(
        await readState(redis(), 'diff:{swcx}:a', STATE_CODE['sliding-window-counter']),
      ).toEqual([170000001, 3, 0]);
      const pttl = await redis().pttl('diff:{swcx}:a');
      expect(pttl).toBeGreaterThan(17_500 - 1_000);
      expect(pttl).toBeLessThanOrEqual(17_500);
    });
  },
);
