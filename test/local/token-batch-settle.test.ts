import { describe, expect, it } from 'vitest';
import type { Policy } from '../../src/core/policy.js';
import type { StageOutcome, StageVerdict } from '../../src/limiter/stage.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { batchPolicy as policy, KEY } from './support/batch-policy.js';
import { gatewayOf, stageCheck } from './support/stage-check.js';

/**
 * What `settle` puts back in a reserve (token-batch.ts): only units of an item the
 * reserve answered "allowed" whose check was then denied, only into a reserve that still
 * lives, and never past max(size, cost) units.
 */

/** A check denied by another policy, as `settle` is told it. */
const deniedElsewhere: StageOutcome = {
  admitted: false,
  decision: {
    policy: 'other',
    path: 'store',
    status: 'OVER_LIMIT',
    allowed: false,
    limit: 1,
    remaining: 0,
    retryAfterMs: 10,
    resetAfterMs: 10,
  },
};

function itemOf(p: Policy, cost: number, key = KEY) {
  return { policy: p, key, capacity: 1_000, cost };
}

/** Enters `cost` at 0 and expects the reserve's answer "allowed". */
async function taken(stage: TokenBatchStage, store: MemoryStore, p: Policy, cost: number) {
  const verdict = await stage.enter(itemOf(p, cost), { nowMs: 0, gateway: gatewayOf(store) });
  expect(verdict).toMatchObject({ kind: 'answer', path: 'batch', decision: { allowed: true } });
  return verdict;
}

function settleDenied(stage: TokenBatchStage, p: Policy, cost: number, verdict: StageVerdict) {
  stage.settle(itemOf(p, cost), verdict, deniedElsewhere, { nowMs: 0 });
}

describe('TokenBatchStage.settle', () => {
  it('puts nothing back for a denial the batch answered itself', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    // 10/s, burst 10: ten checks at 0 reserve 1, 2, 4, 3 and spend them all.
    const p = policy({ rate: 10, burst: 10 });
    for (let i = 0; i < 10; i++) await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    // The eleventh is denied by the store through the batch; the reserve (alive until
    // 1 s) had no unit for it, and gets none when the denial is settled.
    const d = await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    expect(d).toMatchObject({ path: 'batch', allowed: false });
    expect(stage.unitsHeld).toBe(0);
    expect(stage.stats.unitsSpent).toBe(10);
    // So the next check at 0 is not answered from a unit that was never reserved.
    expect(await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 })).toMatchObject({
      allowed: false,
    });
  });

  it('puts nothing back when the reserve was dropped for room before the check was decided', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage({ maxKeys: 1 });
    const p = policy();
    const ctx = { nowMs: 0, gateway: gatewayOf(store) };
    const first = await stage.enter(itemOf(p, 1, '{t1}:api'), ctx);
    // Another key's check takes the one slot: the first key's (spent) reserve is dropped.
    expect(await stage.enter(itemOf(p, 1, '{t2}:api'), ctx)).toMatchObject({ kind: 'answer' });
    stage.settle(itemOf(p, 1, '{t1}:api'), first, deniedElsewhere, ctx);
    expect(stage.unitsHeld).toBe(0);
    expect(stage.stats).toMatchObject({ unitsSpent: 2, unitsDropped: 0 });
  });

  it('fills the reserve no further than size', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy(); // size 8
    // Reserves 1, 2, 4, then 8 of which the 8th check spends 1: 7 held.
    for (let i = 0; i < 8; i++) await taken(stage, store, p, 1);
    const seven = await taken(stage, store, p, 7); // spends the 7
    await taken(stage, store, p, 1); // reserves 8 more, spends 1: 7 held
    expect(stage.unitsHeld).toBe(7);
    // The 7 of the denied check would make 14: only 1 goes back, up to size.
    settleDenied(stage, p, 7, seven);
    expect(stage.unitsHeld).toBe(8);
    expect(stage.stats.unitsSpent).toBe(8 + 7 + 1 - 1);
  });

  it('fills the reserve up to a cost above size, and a later give-back never takes units away', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy(); // size 8
    for (let i = 0; i < 7; i++) await taken(stage, store, p, 1); // reserves 1, 2, 4
    const ten = await taken(stage, store, p, 10); // reserves 10 (no spare: 10 > size), spends them
    const one = await taken(stage, store, p, 1); // reserves 8, spends 1
    expect(stage.unitsHeld).toBe(7);
    // The check of 10 denied: 3 of its units go back, up to max(size, 10) = 10.
    settleDenied(stage, p, 10, ten);
    expect(stage.unitsHeld).toBe(10);
    // The check of 1 denied: the reserve already holds more than size (8), so nothing
    // goes back, and nothing is taken out either.
    settleDenied(stage, p, 1, one);
    expect(stage.unitsHeld).toBe(10);
    expect(stage.stats.unitsSpent).toBe(7 + 10 + 1 - 3);
  });
});
