import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { AlgorithmDecision } from '../../src/core/decision.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type {
  Store,
  StoreApplyOptions,
  StoreRefundOptions,
  StoreRequest,
  StoreResult,
} from '../../src/stores/store.js';
import { batchPolicy as policy, globalRemaining, KEY } from './support/batch-policy.js';
import { gatewayOf, stageCheck } from './support/stage-check.js';

/**
 * A real MemoryStore whose first `slowCalls` applies are applied at once but answered
 * only after `delayMs`: a store call that times out for its caller although it took
 * effect (the ambiguous outcome a reservation must survive).
 */
class SlowAnswers implements Store {
  calls: string[] = [];
  constructor(
    readonly inner: MemoryStore,
    private slowCalls: number,
    private readonly delayMs: number,
  ) {}
  apply(batch: readonly StoreRequest[], o: StoreApplyOptions): Promise<readonly StoreResult[]> {
    this.calls.push(o.requestId ?? '');
    const results = this.inner.apply(batch, o);
    if (this.slowCalls-- <= 0) return Promise.resolve(results);
    return new Promise((resolve) => setTimeout(() => resolve(results), this.delayMs));
  }
  refund(batch: readonly StoreRequest[], o: StoreRefundOptions): Promise<readonly StoreResult[]> {
    return this.inner.refund(batch, o);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

describe('TokenBatchStage', () => {
  it('reserves 1, 2, 4, 8, 8 on a busy key (slow start up to size) and answers from the reserve', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy();
    const paths = new Set<string>();
    for (let i = 0; i < 23; i++) {
      paths.add((await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 })).path);
    }
    expect([...paths]).toEqual(['batch']);
    // 1 + 2 + 4 + 8 + 8 = 23 units in 5 calls.
    expect(stage.stats).toMatchObject({ reservationCalls: 5, unitsReserved: 23, unitsSpent: 23 });
    expect(globalRemaining(store, p, 0)).toBe(1_000 - 23);
  });

  it('makes ≤ 1 remote call per 100 decisions on a hot key with size 100', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy({ batch: { size: 100, ttl: '1s' } });
    for (let i = 0; i < 1_000; i++) await stageCheck([stage], store, p, KEY, 1, { nowMs: i / 2 });
    // Warm-up 1+2+4+...+64 = 127 units in 7 calls, then 100 per call: 7 + 9 = 16.
    expect(stage.stats.reservationCalls).toBe(16);
    expect(stage.stats.reservationCalls / 1_000).toBeLessThanOrEqual(1 / 50);
  });

  it('drops units unspent after ttl (under-use), and a cold key reserves what it spent', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy();
    for (let i = 0; i < 7; i++) await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 }); // 1+2+4
    await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 }); // reserves 8, spends 1
    expect(stage.unitsHeld).toBe(7);
    // 1 s later the 7 have expired; the next reservation is the 1 spent.
    await stageCheck([stage], store, p, KEY, 1, { nowMs: 1_000 });
    expect(stage.stats).toMatchObject({ unitsExpired: 7, unitsReserved: 16 });
    expect(stage.unitsHeld).toBe(0);
  });

  it('asks no more than the store holds; over the limit, denies in process until a whole reservation has refilled', async () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    // Global: 10/s, burst 10. Warm up to a reservation of 8.
    const p = policy({ rate: 10, burst: 10 });
    const paths: string[] = [];
    for (let i = 0; i < 12; i++) {
      const d = await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
      paths.push(`${d.status}`);
    }
    // Reservations 1, 2, 4 (3 left in the store), then 3, not 8: what the store holds.
    // The 11th check needs 1 of an empty bucket: denied, retry 100 ms. The key then waits
    // until a whole batch (8) has refilled: 100 + 7 × 100 = 800 ms.
    expect(paths).toEqual([...Array<string>(10).fill('OK'), 'OVER_LIMIT', 'OVER_LIMIT']);
    expect(stage.stats.reservationCalls).toBe(5);
    const denied = await stageCheck([stage], store, p, KEY, 1, { nowMs: 50 });
    expect(denied).toMatchObject({ path: 'batch', status: 'OVER_LIMIT', retryAfterMs: 750 });
    expect(stage.stats.reservationCalls).toBe(5);
    expect(await stageCheck([stage], store, p, KEY, 1, { nowMs: 800 })).toMatchObject({
      status: 'OK',
    });
    // One call took the units the bucket had refilled (next size 6: twice the last, 3).
    expect(stage.stats).toMatchObject({ reservationCalls: 6, unitsReserved: 16 });
  });

  it('takes once when a timed-out reservation is retried under its id (store dedup)', async () => {
    const store = new SlowAnswers(new MemoryStore(), 1, 60);
    const stage = new TokenBatchStage({ instanceId: 'i1' });
    const p = policy({ timeout: 10 });
    const d = await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    expect(d).toMatchObject({ path: 'batch', allowed: true });
    // The same id twice: the first applied but answered late, the retry got its result.
    expect(store.calls).toEqual(['sluice-batch:i1:0', 'sluice-batch:i1:0']);
    expect(globalRemaining(store.inner, p, 0)).toBe(999);
    expect(stage.stats.unitsReserved).toBe(1);
  });

  it('adds nothing and gives nothing back when both tries time out', async () => {
    const store = new SlowAnswers(new MemoryStore(), 2, 60);
    const stage = new TokenBatchStage({ instanceId: 'i1' });
    const p = policy({ timeout: 10 });
    const item = { policy: p, key: KEY, capacity: 1_000, cost: 1 };
    expect(await stage.enter(item, { nowMs: 0, gateway: gatewayOf(store) })).toBeUndefined();
    expect(stage.unitsHeld).toBe(0);
    await stage.close();
    expect(stage.stats.unitsReturned).toBe(0);
    // The one reservation did take 1 (applied once, answered late): under-use, never refunded.
    expect(globalRemaining(store.inner, p, 0)).toBe(999);
  });

  it('gives unspent units back to the global bucket on close, once', async () => {
    const inner = new MemoryStore();
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    const p = policy();
    for (let i = 0; i < 10; i++) await stageCheck([stage], inner, p, KEY, 1, { nowMs: 0 }); // 1+2+4+8: 5 left
    expect(stage.unitsHeld).toBe(5);
    expect(globalRemaining(inner, p, 0)).toBe(1_000 - 15);
    await Promise.all([stage.close(), stage.close()]);
    await stage.close();
    expect(stage.stats.unitsReturned).toBe(5);
    expect(globalRemaining(inner, p, 0)).toBe(1_000 - 10);
    // After close, items pass straight on to the store.
    expect(stage.enter({ policy: p, key: KEY, capacity: 1_000, cost: 1 }, { nowMs: 0 })).toBe(
      undefined,
    );
  });

  it('puts units back in the reserve when the check is denied elsewhere', () => {
    const store = new MemoryStore();
    const stage = new TokenBatchStage();
    const p = policy();
    const item = { policy: p, key: KEY, capacity: 1_000, cost: 1 };
    return (async () => {
      const verdict = await stage.enter(item, { nowMs: 0, gateway: gatewayOf(store) });
      expect(stage.unitsHeld).toBe(0);
      stage.settle(
        item,
        verdict,
        {
          admitted: false,
          decision: {
            ...(verdict as { decision: AlgorithmDecision }).decision,
            policy: 'other',
            path: 'store',
          },
        },
        { nowMs: 0 },
      );
      expect(stage.unitsHeld).toBe(1);
      expect(stage.stats.unitsSpent).toBe(0);
    })();
  });

  it('passes items on to the store (and its failure mode) while reservations fail', async () => {
    const down = new MemoryStore();
    await down.close();
    const stage = new TokenBatchStage({ retryAfterFailureMs: 1_000 });
    const p = policy({ failureMode: 'open' });
    expect(await stageCheck([stage], down, p, KEY, 1, { nowMs: 0 })).toMatchObject({
      path: 'fail-open',
    });
    expect(await stageCheck([stage], down, p, KEY, 1, { nowMs: 500 })).toMatchObject({
      path: 'fail-open',
    });
    // One reservation tried; the second check went straight on.
    expect(stage.stats.reservationCalls).toBe(1);
  });

  it('reserves side by side without spare units in flight (size 1), and waits for spare units otherwise', async () => {
    const inner = new MemoryStore();
    let inFlight = 0;
    let most = 0;
    const store: Store = {
      apply: async (batch, o) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 5));
        inFlight--;
        return inner.apply(batch, o);
      },
      close: () => inner.close(),
    };
    // Size 1: nothing spare, so 20 concurrent checks make 20 reservations at once.
    const one = new TokenBatchStage();
    const p1 = policy({ batch: { size: 1 } });
    const item1 = { policy: p1, key: KEY, capacity: 1_000, cost: 1 };
    const all1 = await Promise.all(
      Array.from({ length: 20 }, () => one.enter(item1, { nowMs: 0, gateway: gatewayOf(store) })),
    );
    expect(all1.every((v) => v?.kind === 'answer' && v.decision.allowed)).toBe(true);
    expect(most).toBe(20);
    most = 0;
    // Size 8, warmed to 8: 40 concurrent checks wait for reservations with spare units,
    // so about one call per 8; no reserve ever holds more than 8 spare.
    const eight = new TokenBatchStage();
    const p8 = policy({ name: 'api8', batch: { size: 8 } });
    const item8 = { policy: p8, key: '{t1}:api8', capacity: 1_000, cost: 1 };
    for (let i = 0; i < 15; i++) await eight.enter(item8, { nowMs: 0, gateway: gatewayOf(store) });
    const before = eight.stats.reservationCalls;
    const all8 = await Promise.all(
      Array.from({ length: 40 }, () => eight.enter(item8, { nowMs: 0, gateway: gatewayOf(store) })),
    );
    expect(all8.every((v) => v?.kind === 'answer' && v.decision.allowed)).toBe(true);
    expect(eight.stats.reservationCalls - before).toBeLessThanOrEqual(6);
    expect(eight.unitsHeld).toBeLessThanOrEqual(8);
    expect(eight.stats.unitsReserved - eight.stats.unitsSpent).toBe(eight.unitsHeld);
  });

  it('refuses bad options with SLUICE_ERR_BATCH_INVALID', () => {
    expect(() => new TokenBatchStage({ maxKeys: 1.5 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_BATCH_INVALID' }),
    );
    expect(() => new TokenBatchStage({ retryAfterFailureMs: -1 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_BATCH_INVALID' }),
    );
  });
});
