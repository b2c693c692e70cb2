/**
 * The memory store's in-place path must decide exactly as the pure `transition` (the
 * specification): same decisions, same states, bit for bit. Two levels:
 *
 * - algorithm: each in-place step writes into a spare object that still holds an older
 *   state's fields, and the two objects swap on commit, as MemoryStore does; after every
 *   step the held state and the decision must equal the pure transition's;
 * - store: `MemoryStore.decideOne` (handles kept between calls, expiry, eviction) against a
 *   model that runs the pure transitions over a Map with the documented store semantics
 *   (write when admitted with a cost; expire `ttlMs` after the last write, never earlier;
 *   evict the least recently used past `maxKeys`), and the same `stats()`.
 *
 * Costs are random (0 and above capacity included); time moves forwards, backwards, by
 * fractions and past the TTL, from an injected instant.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Algorithm, DecisionCell, InPlaceStep } from '../../../src/algorithms/algorithm.js';
import { fixedWindow } from '../../../src/algorithms/fixed-window.js';
import { gcra } from '../../../src/algorithms/gcra.js';
import { leakyBucket } from '../../../src/algorithms/leaky-bucket.js';
import { slidingLog } from '../../../src/algorithms/sliding-log.js';
import { slidingWindowCounter } from '../../../src/algorithms/sliding-window-counter.js';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import type { AlgorithmDecision } from '../../../src/core/decision.js';
import { MemoryStore, type BucketRef } from '../../../src/stores/memory/memory-store.js';
import { deepFreeze, NUM_RUNS } from '../../algorithms/invariants.js';

const rate = fc.oneof(
  fc.integer({ min: 1, max: 10_000 }),
  fc.double({ min: 0.01, max: 1000, noNaN: true }),
);
const periodMs = fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000);
const bucketParams = fc.record({ rate, periodMs, burst: fc.integer({ min: 1, max: 1_000 }) });
const windowParams = fc.record({
  limit: fc.integer({ min: 1, max: 1_000 }),
  windowMs: fc.constantFrom(1, 10, 1_000, 60_000, 3_600_000),
});
const leakyParams = fc.record({
  rate,
  periodMs,
  capacity: fc.integer({ min: 1, max: 1_000 }),
  mode: fc.constantFrom('reject' as const, 'delay' as const),
});

interface Case {
  readonly alg: Algorithm<unknown, unknown>;
  readonly params: fc.Arbitrary<unknown>;
  /** The params' time scale (period or window), to size time moves. */
  readonly scaleMs: (p: never) => number;
}

const CASES: readonly Case[] = [
  { alg: tokenBucket, params: bucketParams, scaleMs: (p: { periodMs: number }) => p.periodMs },
  { alg: gcra, params: bucketParams, scaleMs: (p: { periodMs: number }) => p.periodMs },
  { alg: leakyBucket, params: leakyParams, scaleMs: (p: { periodMs: number }) => p.periodMs },
  { alg: fixedWindow, params: windowParams, scaleMs: (p: { windowMs: number }) => p.windowMs },
  {
    alg: slidingWindowCounter,
    params: windowParams,
    scaleMs: (p: { windowMs: number }) => p.windowMs,
  },
] as unknown as readonly Case[];

/** Time moves: small, none, backwards, fractional, past the TTL. */
const dtArb = (scaleMs: number): fc.Arbitrary<number> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(scaleMs / 4)) }) },
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.integer({ min: -scaleMs, max: -1 }) },
    { weight: 1, arbitrary: fc.double({ min: -scaleMs, max: scaleMs, noNaN: true }) },
    { weight: 1, arbitrary: fc.integer({ min: 0, max: 4 * scaleMs }) },
  );

/** Params, a start instant and ops over up to 3 keys, with costs up to 2x the capacity. */
function scenario(c: Case) {
  return c.params.chain((params) => {
    const capacity = c.alg.capacity(params);
    const cost = fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 0, max: Math.min(capacity, 5) }) },
      { weight: 2, arbitrary: fc.integer({ min: 0, max: capacity }) },
      { weight: 1, arbitrary: fc.integer({ min: capacity, max: 2 * capacity }) },
    );
    const op = fc.record({
      key: fc.integer({ min: 0, max: 2 }),
      dtMs: dtArb(c.scaleMs(params as never)),
      cost,
    });
    return fc.record({
      params: fc.constant(params),
      startMs: fc.constantFrom(0, 1_000_000, 1_700_000_000_000.5),
      ops: fc.array(op, { minLength: 1, maxLength: 60 }),
    });
  });
}

/** The decision's fields as a new literal, without `delayMs` when it holds none. */
function copyDecision(d: AlgorithmDecision): AlgorithmDecision {
  const { delayMs, ...rest } = d;
  return delayMs === undefined ? rest : { ...rest, delayMs };
}

/** A decision cell holding another decision's fields, as a reused one would. */
function staleCell(): DecisionCell {
  return {
    status: 'OVER_LIMIT',
    allowed: false,
    limit: -1,
    remaining: -1,
    retryAfterMs: -1,
    resetAfterMs: -1,
    delayMs: 123,
  };
}

describe('in-place steps equal the pure transitions', () => {
  it('covers every algorithm but the sliding log', () => {
    for (const c of CASES) expect(c.alg.inPlace).toBeDefined();
    expect(slidingLog.inPlace).toBeUndefined();
  });

  for (const c of CASES) {
    it(`${c.alg.kind}: held state and decisions, with spare objects swapped on commit`, () => {
      const inPlace = c.alg.inPlace as InPlaceStep<unknown, unknown>;
      fc.assert(
        fc.property(scenario(c), ({ params, startMs, ops }) => {
          let pure: unknown = undefined;
          let held: unknown = undefined;
          // A spare that has held other states: every field must be overwritten.
          let spare = inPlace.blank();
          inPlace.step(undefined, startMs - 12_345.25, 1, params, spare, staleCell());
          const out = staleCell();
          let nowMs = startMs;
          for (const op of ops) {
            nowMs += op.dtMs;
            const t = c.alg.transition(pure, nowMs, op.cost, params);
            out.delayMs = undefined;
            inPlace.step(
              held === undefined ? undefined : deepFreeze({ ...(held as object) }),
              nowMs,
              op.cost,
              params,
              spare,
              out,
            );
            expect(copyDecision(out as AlgorithmDecision)).toStrictEqual(t.decision);
            expect({ ...(spare as object) }).toStrictEqual(t.state);
            // Commit as the store does: the spare becomes the state, the old state the spare.
            if (t.decision.allowed && op.cost > 0) {
              const old = held;
              held = spare;
              spare = (old ?? inPlace.blank()) as typeof spare;
              pure = t.state;
            }
          }
        }),
        { numRuns: NUM_RUNS },
      );
    });

    it(`${c.alg.kind}: MemoryStore.decideOne decides as the pure transitions over a Map`, () => {
      fc.assert(
        fc.property(scenario(c), ({ params, startMs, ops }) => {
          const store = new MemoryStore({ maxKeys: 2 });
          const refs: BucketRef[] = [0, 1, 2].map((k) => ({ key: `k${k}`, handle: undefined }));
          // The model: pure transitions, LRU order by Map insertion order.
          const model = new Map<string, { state: unknown; expiresAtMs: number }>();
          const ttlMs = c.alg.ttlMs(params);
          let [evictions, evictedLive, expired, latestMs] = [0, 0, 0, -Infinity];
          let nowMs = startMs;
          for (const op of ops) {
            nowMs += op.dtMs;
            const key = `k${op.key}`;
            // The store's lazy expiry: up to two expired buckets from the least recently
            // used end per call, and the bucket touched; a live touched one becomes the
            // most recently used.
            latestMs = Math.max(latestMs, nowMs);
            for (let n = 0; n < 2; n++) {
              const [lru] = model;
              if (lru === undefined || nowMs < lru[1].expiresAtMs) break;
              model.delete(lru[0]);
              expired += 1;
            }
            let entry = model.get(key);
            if (entry !== undefined) {
              model.delete(key);
              if (nowMs >= entry.expiresAtMs) {
                entry = undefined;
                expired += 1;
              } else model.set(key, entry);
            }
            const t = c.alg.transition(entry?.state, nowMs, op.cost, params);
            if (t.decision.allowed && op.cost > 0) {
              const expiresAtMs = Math.max(entry?.expiresAtMs ?? -Infinity, nowMs + ttlMs);
              if (entry === undefined && model.size >= 2) {
                const [lruKey, lru] = model.entries().next().value!;
                model.delete(lruKey);
                evictions += 1;
                if (lru.expiresAtMs > latestMs) evictedLive += 1;
              }
              model.set(key, { state: t.state, expiresAtMs });
            }
            // Half the calls through a fresh ref (no handle), half through a kept one.
            const ref = op.cost % 2 === 0 ? refs[op.key]! : { key, handle: undefined };
            const d = store.decideOne(ref, c.alg, params, op.cost, nowMs)!;
            expect(copyDecision(d)).toStrictEqual(t.decision);
            expect(store.stats()).toEqual({ keys: model.size, evictions, evictedLive, expired });
          }
        }),
        { numRuns: NUM_RUNS },
      );
    });
  }
});
