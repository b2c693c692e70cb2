/**
 * Differential tests of settleBatch.lua against each algorithm's `settle`
 * (src/algorithms/*.ts), for every algorithm: generated sequences of consumes and settles
 * of earlier admitted consumes (as reservations: estimate = the consume's cost, reserved
 * at its instant) with actuals below, at and above the estimate and random debt caps, on
 * a few keys, through RedisStore (client clock) on one side and `decideBatch` +
 * `Algorithm.settle` on the other. Every consume decision, every post-settle read and
 * every capped count must agree, and a repeated settle must change nothing on either
 * side. A standalone Redis is enough: the script is the same on a Cluster (one call per
 * slot, test/stores/redis/cluster/).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../../src/algorithms/fixed-window.js';
import { gcra } from '../../../src/algorithms/gcra.js';
import { leakyBucket } from '../../../src/algorithms/leaky-bucket.js';
import { slidingLog } from '../../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import { decideBatch } from '../../../src/stores/batch.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreSettleRequest } from '../../../src/stores/store.js';
import { RedisServer } from '../../support/redis-server.js';
import { dtArb } from '../../support/time-steps.js';
import { expectClose, expectSameDecisions } from './differential.js';
import { burstParamsArb, periodMsArb, rateArb, windowParamsArb } from './diff-helpers.js';
import { propertySeed } from '../../support/property-seed.js';

const RUNS = 300;

type Op =
  | { readonly kind: 'consume'; readonly key: number; readonly cost: number }
  | {
      readonly kind: 'settle';
      readonly pick: number;
      /** Actual as a multiple of the estimate, in quarters: 0 .. 3x. */
      readonly quarters: number;
      readonly maxDebt: number;
      /** Settle it a second time right after (a retry). */
      readonly again: boolean;
    };

const cases: readonly [Algorithm<unknown, unknown>, fc.Arbitrary<unknown>, (p: never) => number][] =
  [
    [tokenBucket as never, burstParamsArb(tokenBucket), (p: { periodMs: number }) => p.periodMs],
    [gcra as never, burstParamsArb(gcra), (p: { periodMs: number }) => p.periodMs],
    [
      leakyBucket as never,
      fc
        .record({
          rate: rateArb,
          periodMs: periodMsArb,
          capacity: fc.integer({ min: 1, max: 500 }),
          mode: fc.constantFrom('reject' as const, 'delay' as const),
        })
        .filter((p) => leakyBucket.ttlMs(p) >= 2_000),
      (p: { periodMs: number }) => p.periodMs,
    ],
    [
      fixedWindow as never,
      windowParamsArb(1_000, [60_000, 3_600_000], 10_000_000),
      (p: { windowMs: number }) => p.windowMs,
    ],
    [
      slidingWindowCounter as never,
      windowParamsArb(1_000, [2_000, 60_000], 100_000),
      (p: { windowMs: number }) => p.windowMs,
    ],
    [
      slidingLog as never,
      windowParamsArb(200, [2_000, 60_000], 100_000),
      (p: { windowMs: number }) => p.windowMs,
    ],
  ];

describe('settleBatch.lua agrees with Algorithm.settle', () => {
  let server: RedisServer;
  let store: RedisStore;
  let runId = 0;
  beforeAll(async () => {
    server = await RedisServer.start();
    store = new RedisStore({ client: server.client(), clock: 'client', prefix: 'st' });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  for (const [alg, paramsArb, scaleMs] of cases) {
    it(`${alg.kind}: consumes and settles of earlier consumes (${RUNS} runs)`, async () => {
      const scenario = paramsArb.chain((params) => {
        const cap = alg.capacity(params);
        const op: fc.Arbitrary<Op> = fc.oneof(
          {
            weight: 3,
            arbitrary: fc.record({
              kind: fc.constant('consume' as const),
              key: fc.integer({ min: 0, max: 1 }),
              cost: fc.oneof(fc.integer({ min: 1, max: Math.min(cap, 5) }), fc.constant(cap)),
            }),
          },
          {
            weight: 2,
            arbitrary: fc.record({
              kind: fc.constant('settle' as const),
              pick: fc.nat(),
              quarters: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constant(4)),
              maxDebt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 * cap })),
              again: fc.boolean(),
            }),
          },
        );
        return fc.record({
          params: fc.constant(params),
          startMs: fc.constantFrom(1_000_000, 1_700_000_000_000.5),
          steps: fc.array(fc.record({ dtMs: dtArb(scaleMs(params as never)), op }), {
            minLength: 1,
            maxLength: 25,
          }),
        });
      });
      await fc.assert(
        fc.asyncProperty(scenario, async ({ params, startMs, steps }) => {
          const run = ++runId;
          const states = new Map<string, unknown>();
          const admitted: { key: string; cost: number; atMs: number }[] = [];
          const req = (key: string, cost: number): StoreRequest => ({
            key,
            algorithm: alg,
            params,
            cost,
            enforce: true,
          });
          let nowMs = startMs;
          let settles = 0;
          for (const { dtMs, op } of steps) {
            nowMs += dtMs;
            if (op.kind === 'consume') {
              const r = req(`{run${run}}:k${op.key}`, op.cost);
              const got = await store.apply([r], { nowMs });
              const outcome = decideBatch([r], [states.get(r.key)], nowMs);
              if (outcome.writes[0] !== undefined) states.set(r.key, outcome.writes[0]);
              expectSameDecisions(got, [{ ok: true, decision: outcome.decisions[0]! }]);
              if (outcome.decisions[0]!.allowed)
                admitted.push({ key: r.key, cost: op.cost, atMs: nowMs });
              continue;
            }
            if (admitted.length === 0) continue;
            const c = admitted.splice(op.pick % admitted.length, 1)[0]!;
            const actual = Math.floor((c.cost * op.quarters) / 4);
            const r: StoreSettleRequest = { ...req(c.key, c.cost), actual, maxDebt: op.maxDebt };
            const options = {
              nowMs,
              reservedAtMs: c.atMs,
              requestId: `settle-${run}-${++settles}`,
              keepMs: 60_000,
            };
            const got = await store.settle([r], options);
            const s = alg.settle(
              states.get(c.key),
              nowMs,
              c.atMs,
              c.cost,
              actual,
              op.maxDebt,
              params,
            );
            if (s.state !== undefined) states.set(c.key, s.state);
            const peek = alg.transition(states.get(c.key), nowMs, 0, params).decision;
            expectSameDecisions(got, [{ ok: true, decision: peek }]);
            const first = got[0]!;
            if (!first.ok) throw first.error;
            expect(first.repeated).toBe(false);
            expectClose(first.cappedUnits, s.cappedUnits, 'cappedUnits');
            if (op.again) {
              const retry = (await store.settle([r], options))[0]!;
              if (!retry.ok) throw retry.error;
              expect([retry.repeated, retry.cappedUnits]).toEqual([true, 0]);
              expectSameDecisions([retry], [{ ok: true, decision: peek }]);
            }
          }
        }),
        { numRuns: RUNS, seed: propertySeed() },
      );
    }, 120_000);
  }
});
