import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { LocalStage } from '../../src/local/local-stage.js';
import { OverLimitCache } from '../../src/local/over-limit-cache.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { StoreApplyOptions, StoreRequest } from '../../src/stores/store.js';

/** A MemoryStore that counts its calls: what the stages save. */
class Counted extends MemoryStore {
  calls = 0;
  override apply(batch: readonly StoreRequest[], o: StoreApplyOptions) {
    this.calls++;
    return super.apply(batch, o);
  }
}

const tenant = { tenant: 'acme' };

describe('createLimiter runs the local stages (end to end, through the pipeline)', () => {
  it('has the local bucket and the token batch by default, and the cache only when given bytes', () => {
    const store = new MemoryStore();
    const plain = createLimiter({ store, policies: [] });
    expect(plain.stages.map((s) => s.constructor)).toEqual([LocalStage, TokenBatchStage]);
    const cached = createLimiter({ store, policies: [], overLimitCacheBytes: 4_096 });
    expect(cached.stages.map((s) => s.constructor)).toEqual([
      LocalStage,
      OverLimitCache,
      TokenBatchStage,
    ]);
  });

  it('local: a flood past the local burst is OVER_LIMIT with path local, and the store is not called', async () => {
    const store = new Counted();
    const clock = new ManualClock(1_000);
    const limiter = createLimiter({
      store,
      clock,
      policies: [
        { name: 'api', match: ['tenant'], rate: 100, burst: 50, local: { rate: 10, burst: 5 } },
      ],
    });
    const paths: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await limiter.check(tenant);
      paths.push(`${r.decision!.path}:${r.status}`);
    }
    expect(paths).toEqual([
      ...Array<string>(5).fill('store:OK'),
      ...Array<string>(3).fill('local:OVER_LIMIT'),
    ]);
    expect(store.calls).toBe(5);
  });

  it('batch: a hot key makes one store call per reservation, and close gives unspent units back', async () => {
    const store = new Counted();
    const clock = new ManualClock(1_000);
    const limiter = createLimiter({
      store,
      clock,
      policies: [
        { name: 'api', match: ['tenant'], rate: 1_000, burst: 2_000, batch: { size: 100 } },
      ],
    });
    for (let i = 0; i < 1_000; i++) {
      const r = await limiter.check(tenant);
      expect(r.decision!.path).toBe('batch');
    }
    // Slow start 1, 2, ..., 64 (127 units, 7 calls), then 100 a call: 16 calls.
    expect(store.calls).toBe(16);
    const batch = limiter.stages[1] as TokenBatchStage;
    const held = batch.unitsHeld;
    expect(held).toBe(1_027 - 1_000);
    await limiter.close();
    expect(batch.stats.unitsReturned).toBe(held);
    // The global bucket holds 2,000 − 1,000 spent: what was returned is back.
    const [read] = store.apply(
      [
        {
          key: '{acme}:api',
          algorithm: (await import('../../src/algorithms/index.js')).ALGORITHMS['token-bucket'],
          params: limiter.policies[0]!.params,
          cost: 0,
          enforce: true,
        },
      ],
      { nowMs: 1_000 },
    );
    expect(read!.ok && read!.decision.remaining).toBe(1_000);
  });

  it('over-limit cache: after a store denial, checks are denied with path cache until the retry time', async () => {
    const store = new Counted();
    const clock = new ManualClock(1_000);
    const limiter = createLimiter({
      store,
      clock,
      overLimitCacheBytes: 4_096,
      policies: [{ name: 'api', match: ['tenant'], rate: 10, burst: 2 }],
    });
    const paths: string[] = [];
    for (let i = 0; i < 5; i++) paths.push((await limiter.check(tenant)).decision!.path);
    expect(paths).toEqual(['store', 'store', 'store', 'cache', 'cache']);
    expect(store.calls).toBe(3);
    clock.advance(100); // 10/s: one unit back, exactly the retry time
    expect((await limiter.check(tenant)).decision).toMatchObject({ path: 'store', allowed: true });
  });

  it('with the store failing and fail-open, the local stage still limits', async () => {
    const store = new MemoryStore();
    await store.close(); // a closed store answers every request with SLUICE_ERR_STORE_CLOSED
    const limiter = createLimiter({
      store,
      clock: new ManualClock(1_000),
      policies: [
        {
          name: 'api',
          match: ['tenant'],
          rate: 100,
          failureMode: 'open',
          local: { rate: 10, burst: 3 },
        },
      ],
    });
    const paths: string[] = [];
    for (let i = 0; i < 5; i++) paths.push((await limiter.check(tenant)).decision!.path);
    expect(paths).toEqual(['fail-open', 'fail-open', 'fail-open', 'local', 'local']);
  });
});
