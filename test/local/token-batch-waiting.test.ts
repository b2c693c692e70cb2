import { describe, expect, it } from 'vitest';
import type { Policy } from '../../src/core/policy.js';
import type { StageVerdict } from '../../src/limiter/stage.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { batchPolicy, KEY } from './support/batch-policy.js';
import { HeldStore } from './support/held-store.js';
import { gatewayOf } from './support/stage-check.js';

/**
 * Checks that meet a reservation in flight (token-batch.ts `#refillThenTake`): which of
 * them wait for its spare units and which reserve beside it, read from the reservations
 * the store is asked for while the first is held. No timers: the store holds its answers
 * until the test releases them.
 */

function enter(stage: TokenBatchStage, store: HeldStore, p: Policy, cost: number, nowMs = 0) {
  const item = { policy: p, key: KEY, capacity: 1_000, cost };
  return stage.enter(item, { nowMs, gateway: gatewayOf(store) });
}

/** `n` checks of cost 1 one after another: n = 15 reserves 1, 2, 4, 8 and spends all. */
async function warm(stage: TokenBatchStage, store: HeldStore, p: Policy, n: number) {
  for (let i = 0; i < n; i++) await enter(stage, store, p, 1);
  expect(stage.unitsHeld).toBe(0);
}

/** A stage warmed by `n` checks of cost 1, then a store that holds what it is asked. */
async function holdingAfter(n: number) {
  const store = new HeldStore();
  const stage = new TokenBatchStage();
  const p = batchPolicy();
  await warm(stage, store, p, n);
  store.holding = true;
  return { store, stage, p, from: store.costs.length };
}

function allowed(v: StageVerdict): boolean {
  return v?.kind === 'answer' && v.decision.allowed;
}

describe('TokenBatchStage, checks meeting a reservation in flight', () => {
  it('waits while the spare units in flight cover the waiters, reserves beside it past them', async () => {
    const { store, stage, p, from } = await holdingAfter(15);
    // A needs 5 and reserves 8 (3 spare); B (2) fits in the 3 and waits; C (2) does not
    // (2 + 2 > 3) and size allows more (8 − 2 − 3 > 0): it reserves 2 + 3 spare beside A.
    const a = enter(stage, store, p, 5);
    const b = enter(stage, store, p, 2);
    const c = enter(stage, store, p, 2);
    expect(store.costs.slice(from)).toEqual([8, 5]);
    store.release();
    const verdicts = await Promise.all([a, b, c]);
    expect(verdicts.map(allowed)).toEqual([true, true, true]);
    expect(stage.unitsHeld).toBe(8 + 5 - 9);
    expect(stage.stats.unitsSpent).toBe(15 + 9);
  });

  it('waits when the waiters exactly use up the spare units in flight', async () => {
    const { store, stage, p, from } = await holdingAfter(15);
    // A needs 5 (3 spare); B needs exactly 3: it waits, no second reservation.
    const a = enter(stage, store, p, 5);
    const b = enter(stage, store, p, 3);
    expect(store.costs.slice(from)).toEqual([8]);
    store.release();
    expect((await Promise.all([a, b])).map(allowed)).toEqual([true, true]);
    expect(stage.unitsHeld).toBe(0);
    expect(stage.stats.reservationCalls).toBe(5);
  });

  it('waits when no more may be reserved beside it: the adaptive size, not `size`, is the cap', async () => {
    const { store, stage, p, from } = await holdingAfter(3); // reserves 1, 2: the next is 4
    // A reserves 4 (3 spare); B, C, D wait in the spare; E does not fit (4 > 3), and
    // 4 − 1 − 3 = 0 leaves no room beside A under the adaptive size 4 (8 would leave 4).
    const all = [1, 1, 1, 1, 1].map((cost) => enter(stage, store, p, cost));
    expect(store.costs.slice(from)).toEqual([4]);
    store.release();
    const verdicts = await Promise.all(all);
    expect(verdicts.map(allowed)).toEqual([true, true, true, true, true]);
    // E found the 4 spent after A, B, C, D: it reserved next (8, twice the 4).
    expect(store.costs.slice(from)).toEqual([4, 8]);
  });

  it('forgets the units a waiter needed once it has been answered', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = batchPolicy();
    await warm(stage, store, p, 15);
    store.holding = true;
    const a = enter(stage, store, p, 5); // reserves 8
    const b = enter(stage, store, p, 2); // waits
    store.release();
    expect((await Promise.all([a, b])).map(allowed)).toEqual([true, true]);
    expect(stage.unitsHeld).toBe(1);
    store.holding = true;
    const from = store.costs.length;
    // F needs 7, holds 1: reserves 6 + 1 spare. G (1) fits in that 1 spare: it waits,
    // as no other waiter is left over from the first round.
    const f = enter(stage, store, p, 7);
    const g = enter(stage, store, p, 1);
    expect(store.costs.slice(from)).toEqual([7]);
    store.release();
    expect((await Promise.all([f, g])).map(allowed)).toEqual([true, true]);
  });

  it('reserves beside a reservation in flight no more than the store last said it holds, less the spare in flight', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = batchPolicy({ rate: 1, burst: 21 });
    await warm(stage, store, p, 15); // the store now holds 6
    store.holding = true;
    const from = store.costs.length;
    // A: 1 + 5 spare (6 held by the store). B..F wait in the 5. G does not fit; 8 − 1 − 5
    // = 2 would be room under the size, but the store holds none beyond A's 6: G asks 1.
    const all = [1, 1, 1, 1, 1, 1, 1].map((cost) => enter(stage, store, p, cost));
    expect(store.costs.slice(from)).toEqual([6, 1]);
    store.release();
    const verdicts = await Promise.all(all);
    expect(verdicts.filter(allowed)).toHaveLength(6);
    expect(stage.stats.unitsReserved).toBe(15 + 6);
  });

  it('passes a waiter on to the store when the reservation it waited for failed', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage({ retryAfterFailureMs: 1_000 });
    const p = batchPolicy();
    await warm(stage, store, p, 15);
    store.holding = true;
    const a = enter(stage, store, p, 1); // reserves 8: 7 spare
    const b = enter(stage, store, p, 1); // waits
    store.release(true);
    expect(await Promise.all([a, b])).toEqual([undefined, undefined]);
    // B did not try a reservation of its own: the key is down for 1 s.
    expect(stage.stats.reservationCalls).toBe(5);
    expect(store.costs).toHaveLength(5);
  });

  it('with retryAfterFailureMs 0, a waiter whose reservation failed reserves again at once', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage({ retryAfterFailureMs: 0 });
    const p = batchPolicy();
    await warm(stage, store, p, 15);
    store.holding = true;
    const a = enter(stage, store, p, 1);
    const b = enter(stage, store, p, 1);
    store.release(true);
    const [va, vb] = await Promise.all([a, b]);
    expect(va).toBeUndefined();
    expect(vb).toMatchObject({ kind: 'answer', path: 'batch', decision: { allowed: true } });
    expect(stage.stats.reservationCalls).toBe(6);
  });

  it('passes a waiter on, with no reservation of its own, once close has begun', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const p = batchPolicy();
    await warm(stage, store, p, 15);
    store.holding = true;
    // A reserves 8 (7 spare); 7 wait in the spare; the 9th waits too (no room beside A).
    const all = Array.from({ length: 9 }, () => enter(stage, store, p, 1));
    expect(store.costs).toHaveLength(5);
    const closed = stage.close();
    store.release();
    const verdicts = await Promise.all(all);
    await closed;
    expect(verdicts.slice(0, 8).every(allowed)).toBe(true);
    expect(verdicts[8]).toBeUndefined();
    expect(stage.stats.reservationCalls).toBe(5);
    expect(store.refunds).toEqual([]);
  });
});
