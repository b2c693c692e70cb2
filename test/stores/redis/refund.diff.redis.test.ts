/**
 * Differential tests of refundBatch.lua against `refundState` (src/algorithms/refund.ts),
 * for every algorithm: generated sequences of consumes and refunds of earlier admitted
 * consumes (at their consume instant), on a few keys, through RedisStore (client clock)
 * and the script on one side and `decideBatch` + `refundState` on the other. Every
 * consume decision and every post-refund read must agree. A standalone Redis is enough:
 * the script is the same on a Cluster (where cross-slot.ts calls it), and the Cluster
 * path is covered by test/stores/redis/cluster/.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../../src/algorithms/fixed-window.js';
import { gcra } from '../../../src/algorithms/gcra.js';
import { leakyBucket } from '../../../src/algorithms/leaky-bucket.js';
import { refundState } from '../../../src/algorithms/refund.js';
import { slidingLog } from '../../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import { decideBatch } from '../../../src/stores/batch.js';
import { luaParams } from '../../../src/stores/redis/lua-args.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { decodeDecisions } from '../../../src/stores/redis/reply.js';
import { refundBatchScript } from '../../../src/stores/redis/scripts.js';
import type { StoreRequest } from '../../../src/stores/store.js';
import { RedisServer } from '../../support/redis-server.js';
import { dtArb } from '../../support/time-steps.js';
import { expectSameDecisions } from './differential.js';
import { burstParamsArb, periodMsArb, rateArb, windowParamsArb } from './diff-helpers.js';
import { propertySeed } from '../../support/property-seed.js';

const RUNS = 300;

type Op =
  | { readonly kind: 'consume'; readonly key: number; readonly cost: number }
  | { readonly kind: 'refund'; readonly pick: number };

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

describe('refundBatch.lua agrees with refundState', () => {
  let server: RedisServer;
  let store: RedisStore;
  let refund: ReturnType<typeof refundBatchScript>;
  let runId = 0;
  beforeAll(async () => {
    server = await RedisServer.start();
    store = new RedisStore({ client: server.client(), clock: 'client', prefix: 'rf' });
    refund = refundBatchScript(server.client());
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  for (const [alg, paramsArb, scaleMs] of cases) {
    it(`${alg.kind}: consumes and refunds of earlier consumes (${RUNS} runs)`, async () => {
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
            arbitrary: fc.record({ kind: fc.constant('refund' as const), pick: fc.nat() }),
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
            const r = req(c.key, c.cost);
            const reply = await refund(
              [store.redisKey(c.key)],
              [
                String(nowMs),
                60_000,
                alg.luaCode,
                c.cost,
                alg.ttlMs(params),
                c.atMs,
                ...luaParams(alg.kind, params as Readonly<Record<string, unknown>>),
              ],
            );
            const next = refundState(alg.kind, states.get(c.key), nowMs, c.atMs, c.cost, params);
            if (next !== undefined) states.set(c.key, next);
            const peek = alg.transition(states.get(c.key), nowMs, 0, params).decision;
            expectSameDecisions(
              decodeDecisions(reply, [r], [c.key]).map((decision) => ({ ok: true, decision })),
              [{ ok: true, decision: peek }],
            );
          }
        }),
        { numRuns: RUNS, seed: propertySeed() },
      );
    }, 60_000);
  }
});
