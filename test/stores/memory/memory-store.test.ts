import { describe, expect, it } from 'vitest';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { StoreRequest } from '../../../src/stores/store.js';
import { describeStore } from '../conformance.js';

describeStore('MemoryStore', async () => {
  let store = new MemoryStore();
  const harness = {
    get store() {
      return store;
    },
    reset: async () => {
      store = new MemoryStore();
    },
    close: () => store.close(),
  };
  return harness;
});

const params = { rate: 10, periodMs: 1_000, burst: 10 }; // ttl = 1000ms
const req = (key: string, cost: number): StoreRequest => ({
  key,
  algorithm: tokenBucket as Algorithm<unknown, unknown>,
  params,
  cost,
  enforce: true,
});

describe('MemoryStore: bounds and expiry', () => {
  it('rejects a non-positive maxKeys', () => {
    expect(() => new MemoryStore({ maxKeys: 0 })).toThrow(/maxKeys must be a positive integer/);
  });

  it('holds at most maxKeys and evicts the least recently used, counting live evictions', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    for (const k of ['a', 'b', 'c']) await store.apply([req(k, 10)], { nowMs: 0 });
    await store.apply([req('a', 0)], { nowMs: 1 }); // touch a: b is now least recent
    await store.apply([req('d', 1)], { nowMs: 2 });
    expect(store.stats()).toMatchObject({ keys: 3, evictions: 1, evictedLive: 1 });
    // a kept its state (still empty), b was recreated full: the documented cost of a live eviction.
    expect((await store.apply([req('a', 1)], { nowMs: 2 }))[0]).toMatchObject({
      ok: true,
      decision: { allowed: false },
    });
    expect((await store.apply([req('b', 10)], { nowMs: 2 }))[0]).toMatchObject({
      ok: true,
      decision: { allowed: true },
    });
  });

  it('touches a key on denial too, so a hot denied key is not the one evicted', async () => {
    const store = new MemoryStore({ maxKeys: 2 });
    await store.apply([req('hot', 10)], { nowMs: 0 });
    await store.apply([req('cold', 1)], { nowMs: 0 });
    await store.apply([req('hot', 5)], { nowMs: 0 }); // denied, but used
    await store.apply([req('new', 1)], { nowMs: 0 });
    expect((await store.apply([req('hot', 1)], { nowMs: 0 }))[0]).toMatchObject({
      decision: { allowed: false },
    });
  });

  it('expires idle keys after the TTL and counts them, without counting them as live evictions', async () => {
    const store = new MemoryStore({ maxKeys: 2 });
    await store.apply([req('a', 10)], { nowMs: 0 });
    await store.apply([req('b', 10)], { nowMs: 0 });
    await store.apply([req('c', 1)], { nowMs: 5_000 }); // a and b idle past their 1000ms TTL
    expect(store.stats()).toMatchObject({ keys: 1, evictedLive: 0, expired: 2 });
  });

  it("does not shorten a key's life when a write comes from an earlier clock", async () => {
    const store = new MemoryStore();
    await store.apply([req('k', 10)], { nowMs: 10_000 }); // empty as of t=10000, expires 11000
    await store.apply([req('k', 0)], { nowMs: 5_000 }); // backwards clock writes again
    // At t=10500 the bucket holds exactly 5 tokens; an early expiry would show 10.
    expect((await store.apply([req('k', 0)], { nowMs: 10_500 }))[0]).toMatchObject({
      decision: { remaining: 5 },
    });
  });

  it('answers every request with a StoreError after close', async () => {
    const store = new MemoryStore();
    await store.close();
    const [r] = await store.apply([req('k', 1)], { nowMs: 0 });
    expect(r).toMatchObject({ ok: false, error: { code: 'SLUICE_ERR_STORE_CLOSED' } });
  });
});

describe('MemoryStore: requests are only read', () => {
  it('writes nothing into a frozen request, whatever fields it carries', () => {
    const store = new MemoryStore();
    const r = Object.freeze({ ...req('a', 1), handle: "not the store's" });
    expect(store.applySync([r], { nowMs: 0 })[0]).toMatchObject({ ok: true });
    expect(store.applySync([r], { nowMs: 0 })[0]).toMatchObject({
      ok: true,
      decision: { remaining: 8 },
    });
  });
});
