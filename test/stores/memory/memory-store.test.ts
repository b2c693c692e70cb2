import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gcra } from '../../../src/algorithms/gcra.js';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import { keyValue } from '../../../src/stores/key.js';
import type { KeySpace, StoreRequest } from '../../../src/stores/store.js';
import { describeStore } from '../conformance.js';
import { propertySeed } from '../../support/property-seed.js';

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
/** The decision for value `v` of policy `p`'s key space (its text key is `{<v>}:p`). */
const inSpace = (store: MemoryStore, space: KeySpace, v: string, cost: number, nowMs: number) =>
  store.apply([{ ...req(`{${keyValue(v)}}:p`, cost), space, value: v }], { nowMs })[0]!;

describe('MemoryStore: bounds and expiry', () => {
  it('rejects a non-positive maxKeys', () => {
    expect(() => new MemoryStore({ maxKeys: 0 })).toThrow(/maxKeys must be a positive integer/);
  });

  it('holds at most maxKeys and evicts a bucket not used since the clock hand passed, counting live evictions', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    for (const k of ['a', 'b', 'c']) await store.apply([req(k, 10)], { nowMs: 0 });
    await store.apply([req('a', 0)], { nowMs: 1 }); // use a: the hand spares it once, b is dropped
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

  it('drops the first bucket from the hand when every bucket was used (a turn clears the marks)', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    for (const k of ['a', 'b', 'c']) await store.apply([req(k, 10)], { nowMs: 0 });
    for (const k of ['c', 'b', 'a']) await store.apply([req(k, 0)], { nowMs: 1 });
    await store.apply([req('d', 1)], { nowMs: 2 });
    expect(store.stats()).toMatchObject({ keys: 3, evictions: 1, evictedLive: 1 });
    // a (first slot) was recreated full; b and c kept their empty state.
    expect((await store.apply([req('a', 10)], { nowMs: 2 }))[0]).toMatchObject({
      decision: { allowed: true },
    });
    expect(store.stats()).toMatchObject({ evictions: 2 }); // a's return dropped another
  });

  it('counts an expired bucket written again as a new one: unmarked, so the hand drops it first', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    await store.apply([req('a', 1)], { nowMs: 0 }); // a in the first slot, expires at 1000
    await store.apply([req('a', 0)], { nowMs: 500 }); // used: marked
    await store.apply([req('b', 10)], { nowMs: 600 }); // b emptied, refills 6 by 1200
    await store.apply([req('c', 1)], { nowMs: 600 });
    // a expired at 1000 and is written again: its slot is reused, its mark is gone.
    await store.apply([req('a', 10)], { nowMs: 1_100 });
    await store.apply([req('d', 1)], { nowMs: 1_200 }); // full: the hand starts at a
    expect(store.stats()).toMatchObject({ keys: 3, evictions: 1, evictedLive: 1, expired: 1 });
    // a was dropped (recreated full), not b: an old mark would have spared it.
    expect((await store.apply([req('a', 0)], { nowMs: 1_200 }))[0]).toMatchObject({
      decision: { remaining: 10 },
    });
    expect((await store.apply([req('b', 0)], { nowMs: 1_200 }))[0]).toMatchObject({
      decision: { remaining: 6 },
    });
  });

  it('never holds more than maxKeys, whatever the keys, costs and times', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.array(
          fc.record({
            key: fc.integer({ min: 0, max: 12 }),
            dtMs: fc.integer({ min: 0, max: 700 }),
            cost: fc.integer({ min: 0, max: 10 }),
          }),
          { maxLength: 80 },
        ),
        (maxKeys, ops) => {
          const store = new MemoryStore({ maxKeys });
          const index = store.keySpace('p')!;
          let nowMs = 0;
          let writes = 0;
          for (const op of ops) {
            nowMs += op.dtMs;
            const d =
              op.key % 2 === 0
                ? (inSpace(store, index, `v${op.key}`, op.cost, nowMs) as { decision: unknown })
                    .decision
                : store.apply([req(`k${op.key}`, op.cost)], { nowMs })[0]!.ok;
            if (d !== false && op.cost > 0) writes += 1;
            const stats = store.stats();
            expect(stats.keys).toBeLessThanOrEqual(maxKeys);
            expect(stats.evictedLive).toBeLessThanOrEqual(stats.evictions);
          }
          const { keys, evictions, expired } = store.stats();
          // Every bucket held or dropped was written at least once.
          expect(keys + evictions).toBeLessThanOrEqual(writes + expired);
        },
      ),
      { numRuns: 500, seed: propertySeed() },
    );
  });

  it('reads a bucket as fresh from the instant its TTL has passed', async () => {
    const store = new MemoryStore();
    await store.apply([req('k', 10)], { nowMs: 0 }); // empty, expires at 1000
    expect((await store.apply([req('k', 0)], { nowMs: 999.5 }))[0]).toMatchObject({
      decision: { remaining: 9.995 },
    });
    expect((await store.apply([req('k', 0)], { nowMs: 1_000 }))[0]).toMatchObject({
      decision: { remaining: 10 },
    });
    expect(store.stats()).toMatchObject({ keys: 0, expired: 1 });
  });

  it("reads another algorithm's bucket (the policy's algorithm was changed) as fresh, then replaces it", async () => {
    const store = new MemoryStore();
    const asGcra: StoreRequest = {
      ...req('k', 10),
      algorithm: gcra as Algorithm<unknown, unknown>,
    };
    await store.apply([asGcra], { nowMs: 0 }); // GCRA, empty
    const [first] = await store.apply([req('k', 1)], { nowMs: 0 });
    expect(first).toMatchObject({ ok: true, decision: { allowed: true, remaining: 9 } });
    const [second] = await store.apply([req('k', 1)], { nowMs: 0 });
    expect(second).toMatchObject({ ok: true, decision: { allowed: true, remaining: 8 } });
    expect(store.stats()).toMatchObject({ keys: 1 });
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
    expect(store.apply([r], { nowMs: 0 })[0]).toMatchObject({ ok: true });
    expect(store.apply([r], { nowMs: 0 })[0]).toMatchObject({
      ok: true,
      decision: { remaining: 8 },
    });
  });
});

describe('MemoryStore: key spaces (value indexes)', () => {
  it('hold the bucket of the text key `{<encoded v>}:<policy>` under the raw value', () => {
    const store = new MemoryStore();
    const index = store.keySpace('p')!;
    // A request in the space is found by its value; its key text is not read.
    const byValue = (cost: number): StoreRequest => ({
      ...req('(not read)', cost),
      space: index,
      value: 'a b/{c}',
    });
    expect(store.apply([byValue(4)], { nowMs: 0 })[0]).toMatchObject({
      decision: { remaining: 6 },
    });
    const viaText = store.apply([req('{a%20b%2F%7Bc%7D}:p', 1)], { nowMs: 0 });
    expect(viaText[0]).toMatchObject({ decision: { remaining: 5 } });
    expect(store.apply([byValue(0)], { nowMs: 0 })[0]).toMatchObject({
      decision: { remaining: 5 },
    });
    // A key that is not exactly that encoding is another bucket, held by its text.
    const raw = store.apply([req('{a b/{c}}:p', 1)], { nowMs: 0 });
    expect(raw[0]).toMatchObject({ decision: { remaining: 9 } });
    expect(store.keySpace('p')).toBe(index);
    expect(store.stats()).toMatchObject({ keys: 2 });
  });

  it('are read only by the store that handed them out: another store uses the key text', () => {
    const space = new MemoryStore().keySpace('p')!;
    const other = new MemoryStore();
    const r = { ...req('{a}:p', 3), space, value: 'b' };
    expect(other.apply([r], { nowMs: 0 })[0]).toMatchObject({ decision: { remaining: 7 } });
    expect(other.apply([req('{a}:p', 0)], { nowMs: 0 })[0]).toMatchObject({
      decision: { remaining: 7 },
    });
  });

  it('are refused for a policy name the layout cannot hold', () => {
    expect(new MemoryStore().keySpace('a:b')).toBeUndefined();
  });
});
