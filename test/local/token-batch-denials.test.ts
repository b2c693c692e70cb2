import { describe, expect, it } from 'vitest';
import { algorithmOf } from '../../src/algorithms/index.js';
import type { Policy } from '../../src/core/policy.js';
import type { StageVerdict } from '../../src/limiter/stage.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { batchPolicy, KEY } from './support/batch-policy.js';
import { HeldStore } from './support/held-store.js';
import { gatewayOf, stageCheck } from './support/stage-check.js';

/**
 * Reservations the store denies (token-batch.ts `#refill`, `#stillDenied`): a larger one
 * asked again smaller, the denial of the units needed remembered for the items it covers,
 * a failed call's window, and the size of a reservation after one expired.
 */

function enter(stage: TokenBatchStage, store: HeldStore, p: Policy, cost: number, nowMs = 0) {
  const item = { policy: p, key: KEY, capacity: 1_000, cost };
  return stage.enter(item, { nowMs, gateway: gatewayOf(store) });
}

/** Takes `units` from the global bucket as another instance would. */
function takeElsewhere(store: HeldStore, p: Policy, units: number, nowMs = 0): void {
  const [r] = store.inner.apply(
    [
      {
        key: KEY,
        algorithm: algorithmOf(p.algorithm),
        params: p.params,
        cost: units,
        enforce: true,
      },
    ],
    { nowMs },
  );
  expect(r).toMatchObject({ ok: true, decision: { allowed: true } });
}

function allowed(v: StageVerdict): boolean {
  return v?.kind === 'answer' && v.decision.allowed;
}

/** 1/s, burst 20, size 8: nothing refills while the tests' clock stands at 0. */
const slow = () => batchPolicy({ rate: 1, burst: 20 });

describe('TokenBatchStage, reservations the store denies', () => {
  it('asks again for what the store holds when another instance took units since the last answer', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = slow();
    for (let i = 0; i < 7; i++) await enter(stage, store, p, 1); // reserves 1, 2, 4: 13 left
    takeElsewhere(store, p, 10); // 3 left
    // Next is 8 (1 + 7 spare); the store holds 3: denied, then 1 + 2 spare.
    expect(allowed(await enter(stage, store, p, 1))).toBe(true);
    expect(store.costs).toEqual([1, 2, 4, 8, 3]);
    expect(stage.unitsHeld).toBe(2);
    // The spare asked for and not granted is not counted in flight: once the 2 are spent,
    // a check reserves at once (instead of waiting for a reservation that is not there),
    // and asks only the 1 it needs of the store's 0 (no spare, none beyond the size).
    await enter(stage, store, p, 1);
    await enter(stage, store, p, 1);
    store.holding = true;
    const last = enter(stage, store, p, 1);
    expect(store.costs).toHaveLength(6);
    store.release();
    expect(allowed(await last)).toBe(false);
    expect(store.costs).toEqual([1, 2, 4, 8, 3, 1]);
  });

  it('asks again for the units needed alone when the store holds none, and that denial is the answer', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = slow();
    for (let i = 0; i < 7; i++) await enter(stage, store, p, 1);
    takeElsewhere(store, p, 13); // empty
    const v = await enter(stage, store, p, 1);
    expect(v).toMatchObject({
      kind: 'answer',
      path: 'batch',
      decision: { status: 'OVER_LIMIT', allowed: false, remaining: 0 },
    });
    expect(store.costs).toEqual([1, 2, 4, 8, 1]);
  });

  it('remembers a denial only for items that need as many units beyond what the reserve holds', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = slow();
    await enter(stage, store, p, 1); // reserves 1
    await enter(stage, store, p, 1); // reserves 2: 1 held, 17 in the store
    takeElsewhere(store, p, 16); // 1 left
    // 3 with 1 held needs 2 of the store's 1: denied (asked 3, then 2).
    expect(await enter(stage, store, p, 3)).toMatchObject({
      kind: 'answer',
      decision: { allowed: false, remaining: 2 },
    });
    const calls = store.costs.length;
    // Another 3 needs the same 2: denied from memory, with no call.
    expect(allowed(await enter(stage, store, p, 3))).toBe(false);
    expect(store.costs).toHaveLength(calls);
    // 2 with 1 held needs only 1, which the store has: it asks, and is admitted.
    expect(allowed(await enter(stage, store, p, 2))).toBe(true);
    expect(store.costs.length).toBeGreaterThan(calls);
  });

  it("counts no expired units against a remembered denial: at the reserve's ttl they are gone", async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = slow();
    await enter(stage, store, p, 1);
    await enter(stage, store, p, 1); // 1 held until 1 s
    takeElsewhere(store, p, 16);
    // Denied needing 2; remembered until 1 s + (8 − 2) units at 1/s = 7 s.
    expect(allowed(await enter(stage, store, p, 3))).toBe(false);
    const calls = store.costs.length;
    // At 1 s the held unit has expired: a check of 2 needs 2, as denied, so it is
    // denied from memory, told to come back at 7 s.
    expect(await enter(stage, store, p, 2, 1_000)).toMatchObject({
      kind: 'answer',
      decision: { allowed: false, retryAfterMs: 6_000 },
    });
    expect(store.costs).toHaveLength(calls);
  });

  it('tries a reservation again once retryAfterFailureMs has passed after a failed one', async () => {
    const down = new MemoryStore();
    await down.close();
    const stage = new TokenBatchStage({ retryAfterFailureMs: 1_000 });
    const p = batchPolicy({ failureMode: 'open' });
    await stageCheck([stage], down, p, KEY, 1, { nowMs: 0 });
    await stageCheck([stage], down, p, KEY, 1, { nowMs: 999 });
    expect(stage.stats.reservationCalls).toBe(1);
    await stageCheck([stage], down, p, KEY, 1, { nowMs: 1_000 });
    expect(stage.stats.reservationCalls).toBe(2);
  });
});

describe('TokenBatchStage, the size of the reservation after one expired', () => {
  it('is what the key spent of the expired one', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = batchPolicy();
    // 1, 2, 4, then 8 of which 3 are spent before the ttl (1 s).
    for (let i = 0; i < 10; i++) await enter(stage, store, p, 1);
    expect(stage.unitsHeld).toBe(5);
    await enter(stage, store, p, 1, 1_000);
    expect(store.costs).toEqual([1, 2, 4, 8, 3]);
    expect(stage.stats.unitsExpired).toBe(5);
  });

  it('is unchanged when the expired one was spent to the last unit', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = batchPolicy();
    // A cold key's check of 3 reserves its 3 and no spare (the size is still 1).
    await enter(stage, store, p, 3);
    expect(stage.unitsHeld).toBe(0);
    await enter(stage, store, p, 1, 1_000);
    expect(store.costs).toEqual([3, 1]);
  });
});
