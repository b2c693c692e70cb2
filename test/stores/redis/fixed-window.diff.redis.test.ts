import fc from 'fast-check';
import { expect, it } from 'vitest';
import { fixedWindow, type FixedWindowParams } from '../../../src/algorithms/fixed-window.js';
import { decideBatch } from '../../../src/stores/batch.js';
import { describeDifferential, expectSameDecisions } from './differential.js';
import { applyOnOneKey, expectSameBits, requestFor, windowParamsArb } from './diff-helpers.js';
import { readState, STATE_CODE } from '../../support/redis-state.js';
import { propertySeed } from '../../support/property-seed.js';

// Unlike the other algorithms, a fixed window key expires at the end of its window, which
// can be 1ms away when a step lands just before a boundary; Redis counts that 1ms in real
// time, and a later step of the run (same virtual window, e.g. dt 0 or backwards) would
// then find the key gone while the TypeScript state still counts. Steps take ~0.25ms, and
// landing that close to a boundary is rare in proportion to 1 / windowMs, so windows of a
// minute or more keep that well out of reach; time steps scale with the window, so every
// boundary case is still generated. Odd lengths put the epoch-aligned boundaries at
// unround instants of the epoch-ms starts.
const paramsArb = windowParamsArb(1_000, [60_000, 3_600_000, 86_400_000], 10_000_000);

const request = requestFor(fixedWindow);

describeDifferential(
  fixedWindow,
  paramsArb,
  (p) => p.windowMs,
  ({ store, redis }) => {
    let runId = 0;

    // The shared tolerance (1e-9, or 12 digits) cannot see `(window + 1) * windowMs - nowMs`
    // reordered: that changes the result by an ulp or so. The port does the same operations
    // in the same order, so every number must be the same double (numbers travel as packed
    // doubles, exact). One key, fractional times from
    // 0 up, so the wait to the window's end carries every rounding. fast-check's doubles
    // favour their bounds, so a start of 0 plus a step of windowMs minus a hair lands a
    // hair before a boundary: the key's PX is then 1ms of real time (see paramsArb), so
    // scenarios that come within 100ms of a window's end are left out here.
    it('is bit-identical to the TypeScript transition (300 runs)', async () => {
      const traffic = fc
        .record({
          limit: fc.integer({ min: 1, max: 10 }),
          windowMs: fc.integer({ min: 60_000, max: 1_000_000 }),
        })
        .chain((params) =>
          fc.record({
            params: fc.constant(params),
            startMs: fc.oneof(
              fc.double({ min: 0, max: 10_000_000, noNaN: true }),
              fc.constant(1_700_000_000_000.5),
            ),
            steps: fc.array(
              fc.record({
                dtMs: fc.oneof(
                  fc.double({ min: -params.windowMs, max: params.windowMs, noNaN: true }),
                  fc.constant(0),
                ),
                costs: fc.array(fc.integer({ min: 0, max: params.limit }), {
                  minLength: 1,
                  maxLength: 3,
                }),
              }),
              { minLength: 1, maxLength: 20 },
            ),
          }),
        )
        .filter(({ params: { windowMs }, startMs, steps }) => {
          let nowMs = startMs;
          return steps.every(({ dtMs }) => {
            nowMs += dtMs;
            return (Math.floor(nowMs / windowMs) + 1) * windowMs - nowMs >= 100;
          });
        });
      await fc.assert(
        fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
          const key = `{fwbits${++runId}}:k`;
          let state: unknown;
          let nowMs = startMs;
          for (const step of steps) {
            nowMs += step.dtMs;
            const batch = step.costs.map((cost) => request(key, params, cost));
            const applied = await applyOnOneKey(store(), batch, state, nowMs);
            state = applied.state;
            expectSameBits(applied.r, applied.want, (i) => `item ${i} at ${nowMs}`);
          }
        }),
        { numRuns: 300, seed: propertySeed() },
      );
    });

    // envoyproxy/ratelimit's counting: denials charged (counts past the limit, costs above
    // it), in all-or-nothing batches (charged whatever the batch decides) and in
    // independent calls, mixed with requests that are not charged when denied.
    it('agrees on charged denials, in batches and in independent calls (300 runs)', async () => {
      const traffic = fc
        .record({
          limit: fc.integer({ min: 1, max: 10 }),
          windowMs: fc.integer({ min: 60_000, max: 1_000_000 }),
        })
        .chain((params) =>
          fc.record({
            params: fc.constant(params),
            startMs: fc.constantFrom(1_000_000.25, 1_700_000_000_000.5),
            steps: fc.array(
              fc.record({
                dtMs: fc.double({ min: -params.windowMs / 2, max: params.windowMs, noNaN: true }),
                independent: fc.boolean(),
                items: fc.array(
                  fc.record({
                    key: fc.integer({ min: 0, max: 2 }),
                    cost: fc.integer({ min: 0, max: params.limit + 3 }),
                    enforce: fc.oneof(
                      { weight: 4, arbitrary: fc.constant(true) },
                      { weight: 1, arbitrary: fc.constant(false) },
                    ),
                  }),
                  { minLength: 1, maxLength: 4 },
                ),
              }),
              { minLength: 1, maxLength: 20 },
            ),
          }),
        )
        .filter(({ params: { windowMs }, startMs, steps }) => {
          let nowMs = startMs;
          return steps.every(({ dtMs }) => {
            nowMs += dtMs;
            return (Math.floor(nowMs / windowMs) + 1) * windowMs - nowMs >= 100;
          });
        });
      await fc.assert(
        fc.asyncProperty(traffic, async ({ params, startMs, steps }) => {
          const run = ++runId;
          const charging = fixedWindow.chargingDenied!(params);
          const states = new Map<string, unknown>();
          let nowMs = startMs;
          for (const step of steps) {
            nowMs += step.dtMs;
            // key 0 charges denials, keys 1 and 2 do not: a key is one or the other for the
            // whole run, as a policy is
            const batch = step.items.map((it) =>
              request(
                `{fwc${run}}:k${it.key}`,
                it.key === 0 ? charging : params,
                it.key === 0 || it.cost <= params.limit ? it.cost : params.limit,
                it.enforce,
              ),
            );
            const r = await store().apply(batch, { nowMs, independent: step.independent });
            const outcome = decideBatch(
              batch,
              batch.map((b) => states.get(b.key)),
              nowMs,
              step.independent,
            );
            outcome.writes.forEach((w, i) => {
              if (w !== undefined) states.set(batch[i]!.key, w);
            });
            expectSameDecisions(
              r,
              outcome.decisions.map((decision) => ({ ok: true as const, decision })),
            );
          }
        }),
        { numRuns: 300, seed: propertySeed() },
      );
    });

    it('expires a key at the end of its window, which backwards time pushes later', async () => {
      const params: FixedWindowParams = { limit: 5, windowMs: 60_000 };
      // 1_700_000_040_000 = window 28_333_334 (starts 1_700_000_040_000), so 60_000ms to its end;
      // 10_000.5ms later, 49_999.5ms are left: PX rounds that up to 50_000.
      const t0 = 1_700_000_040_000;
      await store().apply([request('{fwx}:a', params, 1)], { nowMs: t0 + 10_000.5 });
      const pttlA = await redis().pttl('diff:{fwx}:a');
      expect(pttlA).toBeGreaterThan(50_000 - 1_000);
      expect(pttlA).toBeLessThanOrEqual(50_000);
      // Back 70s: still the later window's count (5 - 1 - 1 = 3 left), and it lasts until
      // that window ends, 60_000 + 59_999.5ms from the earlier now.
      const [r] = await store().apply([request('{fwx}:a', params, 1)], { nowMs: t0 - 59_999.5 });
      expect(r).toMatchObject({ ok: true, decision: { remaining: 3 } });
      const pttlB = await redis().pttl('diff:{fwx}:a');
      expect(pttlB).toBeGreaterThan(120_000 - 1_000);
      expect(pttlB).toBeLessThanOrEqual(120_000);
      expect(await readState(redis(), 'diff:{fwx}:a', STATE_CODE['fixed-window'])).toEqual([
        28333334, 2,
      ]);
    });
  },
);
