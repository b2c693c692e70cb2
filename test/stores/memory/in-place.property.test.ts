/**
 * The memory store's in-place path must decide exactly as the pure `transition` (the
 * specification): same decisions, same states, bit for bit. Two levels:
 *
 * - algorithm: each in-place step writes into a spare object that still holds the fields
 *   of earlier steps, and a commit copies the spare into the held object (which carries
 *   other fields too), as MemoryStore does; after every step the held state and the
 *   decision must equal the pure transition's;
 * - store: `MemoryStore` through each of its single-request paths (`apply` by value in
 *   its key space, independent, with another store's space, by key text), on text keys and keys of the
 *   value-index layout, against a model that runs the pure transitions over plain arrays
 *   with the documented store semantics (write when admitted with a cost; expire `ttlMs`
 *   after the last write, never earlier; a sweep of two ring slots per call; CLOCK
 *   eviction past `maxKeys`), and the same `stats()`.
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
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { deepFreeze, NUM_RUNS } from '../../algorithms/invariants.js';
import { dtArb } from '../../support/time-steps.js';
import { propertySeed } from '../../support/property-seed.js';

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

/** Keys of the store test (see `KEYS`), more than the store may hold. */
const KEY_COUNT = 5;
const MAX_KEYS = 3;

/** Params, a start instant and ops over up to 5 keys, with costs up to 2x the capacity. */
function scenario(c: Case) {
  return c.params.chain((params) => {
    const capacity = c.alg.capacity(params);
    const cost = fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 0, max: Math.min(capacity, 5) }) },
      { weight: 2, arbitrary: fc.integer({ min: 0, max: capacity }) },
      { weight: 1, arbitrary: fc.integer({ min: capacity, max: 2 * capacity }) },
    );
    const op = fc.record({
      key: fc.integer({ min: 0, max: KEY_COUNT - 1 }),
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
    it(`${c.alg.kind}: held state and decisions, with a reused spare copied in on commit`, () => {
      const inPlace = c.alg.inPlace as InPlaceStep<unknown, unknown>;
      fc.assert(
        fc.property(scenario(c), ({ params, startMs, ops }) => {
          let pure: unknown = undefined;
          // The held object carries fields of its own, as a store's bucket does.
          let held: Record<string, unknown> | undefined = undefined;
          // A spare that has held other states: every field must be overwritten.
          const spare = inPlace.blank();
          inPlace.step(undefined, startMs - 12_345.25, 1, params, spare, staleCell());
          const out = staleCell();
          let nowMs = startMs;
          for (const op of ops) {
            nowMs += op.dtMs;
            const t = c.alg.transition(pure, nowMs, op.cost, params);
            out.delayMs = undefined;
            inPlace.step(
              held === undefined ? undefined : deepFreeze({ ...held }),
              nowMs,
              op.cost,
              params,
              spare,
              out,
            );
            expect(copyDecision(out as AlgorithmDecision)).toStrictEqual(t.decision);
            expect({ ...(spare as object) }).toStrictEqual(t.state);
            // Commit as the store does: the spare's fields are copied into the held object.
            if (t.decision.allowed && op.cost > 0) {
              held ??= { store: 'own', slot: 7 };
              inPlace.copy(spare, held as never);
              const { store, slot, ...state } = held;
              expect({ store, slot }).toStrictEqual({ store: 'own', slot: 7 });
              expect(state).toStrictEqual(t.state);
              pure = t.state;
            }
          }
        }),
        { numRuns: NUM_RUNS, seed: propertySeed() },
      );
    });

    it(`${c.alg.kind}: MemoryStore decides as the pure transitions over the documented store model`, () => {
      fc.assert(
        fc.property(scenario(c), fc.array(fc.nat(3)), ({ params, startMs, ops }, vias) => {
          const store = new MemoryStore({ maxKeys: MAX_KEYS });
          const index = store.keySpace('p')!;
          const foreign = new MemoryStore().keySpace('p')!;
          const model = storeModel(c.alg, params, MAX_KEYS);
          let nowMs = startMs;
          ops.forEach((op, i) => {
            nowMs += op.dtMs;
            const key = KEYS[op.key]!;
            const t = model.apply(key.text, nowMs, op.cost);
            const via = vias[i % Math.max(1, vias.length)] ?? 0;
            const r: StoreRequest = {
              key: key.text,
              algorithm: c.alg,
              params,
              cost: op.cost,
              enforce: true,
            };
            let result: StoreResult;
            if (via === 0 && key.value !== undefined) {
              // By value in the store's key space (no key text read).
              [result] = store.apply([{ ...r, space: index, value: key.value }], { nowMs }) as [
                StoreResult,
              ];
            } else if (via === 1) {
              // A batch of one decided independently (a fresh decision per request).
              [result] = store.apply([r], { nowMs, independent: true }) as [StoreResult];
            } else if (via === 2) {
              // Another store's key space: ignored, the key text finds the bucket.
              [result] = store.apply([{ ...r, space: foreign, value: 'other' }], { nowMs }) as [
                StoreResult,
              ];
            } else {
              [result] = store.apply([r], { nowMs }) as [StoreResult];
            }
            const d = (result as { decision: AlgorithmDecision }).decision;
            expect(copyDecision(d)).toStrictEqual(t);
            expect(store.stats()).toEqual(model.stats());
          });
        }),
        { numRuns: NUM_RUNS, seed: propertySeed() },
      );
    });
  }
});

/**
 * Bucket keys for the store test: text keys (one with a scope) and keys of the value-index
 * layout (one with a value that needs percent-encoding), over `maxKeys: 3`.
 */
const KEYS: readonly { readonly text: string; readonly value?: string }[] = [
  { text: 'k0' },
  { text: '{a}:p', value: 'a' },
  { text: '{a%20%7Bb%7D}:p', value: 'a {b}' },
  { text: '{b}:p:x' },
  { text: '{c}:p', value: 'c' },
];

/**
 * The store's documented semantics over plain arrays, keyed by text: buckets in ring slots
 * (freed slots reused last-freed first), an expiry and a use mark per slot; per call a
 * sweep of the next two slots, then the decision; CLOCK eviction when a new bucket would
 * pass `maxKeys`.
 */
function storeModel(alg: Algorithm<unknown, unknown>, params: unknown, maxKeys: number) {
  const ttlMs = alg.ttlMs(params);
  const slots: (string | undefined)[] = [];
  const expiry: number[] = [];
  const used: number[] = [];
  const free: number[] = [];
  const held = new Map<string, { slot: number; state: unknown }>();
  let [hand, sweepAt, evictions, evictedLive, expired, latestMs] = [0, 0, 0, 0, 0, -Infinity];
  const remove = (slot: number): void => {
    held.delete(slots[slot]!);
    slots[slot] = undefined;
    expiry[slot] = Infinity;
    used[slot] = 0;
    free.push(slot);
  };
  const insert = (key: string, state: unknown, expiresAtMs: number): void => {
    if (held.size >= maxKeys) {
      for (;;) {
        if (hand >= slots.length) hand = 0;
        if (used[hand] === 0) break;
        used[hand] = 0;
        hand += 1;
      }
      evictions += 1;
      if (expiry[hand]! > latestMs) evictedLive += 1;
      remove(hand);
      hand += 1;
    }
    const slot = free.pop() ?? slots.length;
    slots[slot] = key;
    expiry[slot] = expiresAtMs;
    used[slot] = 0;
    held.set(key, { slot, state });
  };
  return {
    apply(key: string, nowMs: number, cost: number): AlgorithmDecision {
      latestMs = Math.max(latestMs, nowMs);
      for (let n = 0; n < 2 && slots.length > 0; n++) {
        if (sweepAt >= slots.length) sweepAt = 0;
        if (slots[sweepAt] !== undefined && nowMs >= expiry[sweepAt]!) {
          remove(sweepAt);
          expired += 1;
        }
        sweepAt += 1;
      }
      const e = held.get(key);
      const isExpired = e !== undefined && nowMs >= expiry[e.slot]!;
      if (isExpired) expired += 1;
      else if (e !== undefined) used[e.slot] = 1;
      const t = alg.transition(isExpired ? undefined : e?.state, nowMs, cost, params);
      if (t.decision.allowed && cost > 0) {
        if (e === undefined) insert(key, t.state, nowMs + ttlMs);
        else {
          e.state = t.state;
          if (isExpired) used[e.slot] = 0;
          expiry[e.slot] = isExpired ? nowMs + ttlMs : Math.max(expiry[e.slot]!, nowMs + ttlMs);
        }
      } else if (isExpired) remove(e.slot);
      return t.decision;
    },
    stats: () => ({ keys: held.size, evictions, evictedLive, expired }),
  };
}
