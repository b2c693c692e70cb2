/**
 * Differential testing of applyBatch.lua against the TypeScript transitions: the same
 * generated batches go through `decideBatch` (the transitions plus the batch rules, over
 * a plain map that never expires) and RedisStore in client-clock mode, and every
 * decision must agree. MemoryStore is not the reference here: it expires keys in virtual
 * time, Redis in real time.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import type { AlgorithmDecision } from '../../../src/core/decision.js';
import { decideBatch } from '../../../src/stores/batch.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { propertySeed } from '../../support/property-seed.js';
import { RedisServer } from '../../support/redis-server.js';
import { dtArb } from '../../support/time-steps.js';
import type { DiffContext } from './diff-helpers.js';

export const DIFF_RUNS = 1_000;

export interface DiffStep {
  readonly dtMs: number;
  readonly items: readonly {
    readonly key: number;
    readonly cost: number;
    readonly enforce: boolean;
  }[];
}

/** Numbers agree to 1e-9, or to 12 significant digits for large ones (waits of days). */
export function expectClose(a: number, b: number, what: string): void {
  if (a === b) return; // also Infinity, a wait that never ends
  const tol = Math.max(1e-9, Math.abs(b) * 1e-12);
  if (!(Math.abs(a - b) <= tol)) expect.fail(`${what}: redis ${a} vs typescript ${b}`);
}

export function expectSameDecisions(
  redis: readonly StoreResult[],
  mem: readonly StoreResult[],
): void {
  expect(redis.length).toBe(mem.length);
  redis.forEach((r, i) => {
    if (!r.ok) throw r.error;
    const m = mem[i]!;
    if (!m.ok) throw m.error;
    const a: AlgorithmDecision = r.decision;
    const b: AlgorithmDecision = m.decision;
    expect([a.status, a.allowed, a.limit]).toEqual([b.status, b.allowed, b.limit]);
    expectClose(a.remaining, b.remaining, `item ${i} remaining`);
    expectClose(a.retryAfterMs, b.retryAfterMs, `item ${i} retryAfterMs`);
    expectClose(a.resetAfterMs, b.resetAfterMs, `item ${i} resetAfterMs`);
    expect(a.delayMs === undefined).toBe(b.delayMs === undefined);
    if (a.delayMs !== undefined) expectClose(a.delayMs, b.delayMs!, `item ${i} delayMs`);
  });
}

/**
 * Registers a differential suite. `paramsArb` must keep `ttlMs` at 2s or more: Redis
 * expires keys in real time while these runs move a virtual clock, and a run lasts far
 * less than 2s, so no key expires under a run.
 */
export function describeDifferential<P>(
  alg: Algorithm<P, unknown>,
  paramsArb: fc.Arbitrary<P>,
  scaleMs: (p: P) => number,
  extra?: (ctx: DiffContext) => void,
): void {
  describe(`${alg.kind}: applyBatch.lua agrees with the TypeScript transition`, () => {
    let server: RedisServer;
    let store: RedisStore;
    let runId = 0;
    beforeAll(async () => {
      server = await RedisServer.start();
      store = new RedisStore({ client: server.client(), clock: 'client', prefix: 'diff' });
    });
    afterAll(async () => {
      await store?.close();
      await server?.stop();
    });

    const scenario = paramsArb.chain((params) => {
      const scale = scaleMs(params);
      const cap = alg.capacity(params);
      const item = fc.record({
        key: fc.integer({ min: 0, max: 2 }),
        cost: fc.oneof(
          { weight: 4, arbitrary: fc.integer({ min: 1, max: Math.min(cap, 5) }) },
          { weight: 2, arbitrary: fc.integer({ min: 0, max: cap }) },
          { weight: 1, arbitrary: fc.constant(cap) },
          // never fits: INVALID_POLICY, with the state's reset-after
          { weight: 1, arbitrary: fc.constant(cap + 1) },
        ),
        enforce: fc.oneof(
          { weight: 5, arbitrary: fc.constant(true) },
          { weight: 1, arbitrary: fc.constant(false) },
        ),
      });
      const dt = dtArb(scale);
      return fc.record({
        params: fc.constant(params),
        startMs: fc.constantFrom(1_000_000, 1_700_000_000_000.5),
        steps: fc.array(
          fc.record({ dtMs: dt, items: fc.array(item, { minLength: 1, maxLength: 3 }) }),
          {
            minLength: 1,
            maxLength: 30,
          },
        ),
      });
    });

    it(`agrees on generated (time advance, cost, key) sequences, single and multi-key batches (${DIFF_RUNS} runs)`, async () => {
      await fc.assert(
        fc.asyncProperty(scenario, async ({ params, startMs, steps }) => {
          const run = ++runId;
          const states = new Map<string, unknown>();
          let nowMs = startMs;
          for (const step of steps) {
            nowMs += step.dtMs;
            const batch: StoreRequest[] = step.items.map((it) => ({
              key: `{run${run}}:k${it.key}`,
              algorithm: alg as Algorithm<unknown, unknown>,
              params,
              cost: it.cost,
              enforce: it.enforce,
            }));
            const r = await store.apply(batch, { nowMs });
            const outcome = decideBatch(
              batch,
              batch.map((b) => states.get(b.key)),
              nowMs,
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
        { numRuns: DIFF_RUNS, seed: propertySeed() },
      );
    });

    extra?.({ store: () => store, redis: () => server.client() });
  });
}
