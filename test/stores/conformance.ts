/**
 * The behaviour every Store must have, run against each store with `describeStore`.
 * Stores that use a server clock run this in client-clock mode, so `nowMs` drives them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { tokenBucket } from '../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../src/algorithms/algorithm.js';
import type { Store, StoreRequest } from '../../src/stores/store.js';

export interface StoreHarness {
  readonly store: Store;
  /** Removes every bucket so each test starts from nothing. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

// Slow on purpose: a Redis store in client-clock mode still expires keys by Redis's own
// clock (a bucket's TTL is its time to refill), while these tests hold the client's clock
// still. At 1 unit/s a bucket lives 1 s per unit missing, and a window 100 s: no key can
// expire between two calls of a test however busy the machine (at 100/s and 1 s windows,
// a 15-unit deficit lived 150 ms, and runs at a load of 12 lost it between calls).
const tb = { rate: 100, periodMs: 100_000, burst: 20 };
const fw = { limit: 10, windowMs: 100_000 };
/** The fixed window charging denied requests too (envoyproxy/ratelimit's counting). */
const fwc = fixedWindow.chargingDenied!(fw);

function req(
  key: string,
  cost: number,
  enforce = true,
  alg: 'tb' | 'fw' | 'fwc' = 'tb',
): StoreRequest {
  return {
    key,
    algorithm: (alg === 'tb' ? tokenBucket : fixedWindow) as Algorithm<unknown, unknown>,
    params: alg === 'tb' ? tb : alg === 'fw' ? fw : fwc,
    cost,
    enforce,
  };
}

export function describeStore(name: string, make: () => Promise<StoreHarness>): void {
  describe(`${name}: store conformance`, () => {
    let h: StoreHarness;
    let n = 0;
    const key = (s: string): string => `{t${++n}}:${s}`;
    beforeAll(async () => {
      h = await make();
    });
    afterAll(async () => {
      await h.close();
    });

    async function decide(batch: StoreRequest[], nowMs: number, independent = false) {
      const results = await h.store.apply(batch, {
        nowMs,
        ...(independent ? { independent } : {}),
      });
      return results.map((r) => {
        if (!r.ok) throw r.error;
        return r.decision;
      });
    }

    it('consumes exactly the cost and denies what does not fit, with exact retry-after', async () => {
      const k = key('a');
      const t = 1_000_000;
      expect((await decide([req(k, 15)], t))[0]).toMatchObject({ allowed: true, remaining: 5 });
      const denied = (await decide([req(k, 6)], t))[0]!;
      expect(denied).toMatchObject({ allowed: false, status: 'OVER_LIMIT', remaining: 5 });
      expect(denied.retryAfterMs).toBeCloseTo(1_000, 6); // 1 missing unit at 1/s
      expect((await decide([req(k, 5)], t))[0]).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('keeps different keys isolated', async () => {
      const a = key('a');
      const b = key('b');
      await decide([req(a, 20)], 5_000);
      expect((await decide([req(b, 20)], 5_000))[0]!.allowed).toBe(true);
      expect((await decide([req(a, 1)], 5_000))[0]!.allowed).toBe(false);
    });

    it('is all-or-nothing: one enforced denial consumes nothing anywhere in the batch', async () => {
      const a = key('tenant');
      const b = key('route');
      await decide([req(b, 18)], 10_000);
      const ds = await decide([req(a, 5), req(b, 5)], 10_000);
      expect(ds.map((d) => d.allowed)).toEqual([true, false]);
      expect(ds[0]!.remaining).toBe(20); // reported unconsumed
      const peek = await decide([req(a, 0), req(b, 0)], 10_000);
      expect(peek.map((d) => d.remaining)).toEqual([20, 2]);
    });

    it('never lets a shadow denial block the batch, and consumes a fitting shadow request', async () => {
      const real = key('real');
      const shadow = key('shadow');
      await decide([req(shadow, 20)], 20_000);
      const ds = await decide([req(real, 3), req(shadow, 3, false)], 20_000);
      expect(ds.map((d) => d.allowed)).toEqual([true, false]);
      const ds2 = await decide([req(real, 0), req(key('s2'), 4, false)], 20_000);
      expect(ds2[1]).toMatchObject({ allowed: true, remaining: 16 });
      expect((await decide([req(real, 0)], 20_000))[0]!.remaining).toBe(17);
    });

    it('chains two requests on the same key within one batch', async () => {
      const k = key('dup');
      const ds = await decide([req(k, 12), req(k, 12)], 30_000);
      expect(ds.map((d) => d.allowed)).toEqual([true, false]);
      expect((await decide([req(k, 0)], 30_000))[0]!.remaining).toBe(20);
      const ok = await decide([req(k, 12), req(k, 8)], 30_000);
      expect(ok.map((d) => d.remaining)).toEqual([8, 0]);
    });

    it('refills with time and recreates an idle key as full after its TTL', async () => {
      const k = key('ttl');
      await decide([req(k, 20)], 40_000);
      expect((await decide([req(k, 0)], 45_000))[0]!.remaining).toBeCloseTo(5, 9);
      const ttl = tokenBucket.ttlMs(tb);
      expect((await decide([req(k, 0)], 40_000 + ttl + 1))[0]!.remaining).toBe(20);
    });

    it('independent: each request is its own batch, in order, in one call', async () => {
      const a = key('ia');
      const b = key('ib');
      await decide([req(b, 18)], 60_000);
      // b is denied; a is consumed anyway, and the second a sees the first
      const ds = await decide([req(a, 5), req(b, 5), req(a, 12), req(a, 5)], 60_000, true);
      expect(ds.map((d) => [d.allowed, d.remaining])).toEqual([
        [true, 15],
        [false, 2],
        [true, 3],
        [false, 3],
      ]);
      const peek = await decide([req(a, 0), req(b, 0)], 60_000);
      expect(peek.map((d) => d.remaining)).toEqual([3, 2]);
      // a shadow request is consumed when it fits, whatever the others do
      const s = key('is');
      const ds2 = await decide([req(b, 5), req(s, 4, false)], 60_000, true);
      expect(ds2.map((d) => d.allowed)).toEqual([false, true]);
      expect((await decide([req(s, 0)], 60_000))[0]!.remaining).toBe(16);
    });

    it('charges a denied request under params that charge denials, in every kind of call', async () => {
      const k = key('charged');
      // 8 fit; 5 more are denied and charged (13); even a peek is over now
      expect((await decide([req(k, 8, true, 'fwc')], 70_000))[0]).toMatchObject({
        allowed: true,
        remaining: 2,
      });
      expect((await decide([req(k, 5, true, 'fwc')], 70_000))[0]).toMatchObject({
        allowed: false,
        status: 'OVER_LIMIT',
        remaining: 2,
      });
      expect((await decide([req(k, 0, true, 'fwc')], 70_000))[0]).toMatchObject({
        allowed: false,
        remaining: 0,
      });
      // above the limit: OVER_LIMIT, never fits, charged (count 11)
      const big = (await decide([req(key('big'), 11, true, 'fwc')], 71_000))[0]!;
      expect(big).toMatchObject({ status: 'OVER_LIMIT', remaining: 10, retryAfterMs: Infinity });
      // in an all-or-nothing batch that another request denies, it is charged all the same,
      // while the request that fit is not (one hash tag: a Redis Cluster refuses such a
      // batch across slots)
      const g = key('g');
      const [c, t] = [`${g}:c`, `${g}:t`];
      await decide([req(t, 20)], 72_000);
      const ds = await decide([req(c, 4, true, 'fwc'), req(t, 1), req(`${g}:u`, 1)], 72_000);
      expect(ds.map((d) => d.allowed)).toEqual([true, false, true]);
      expect((await decide([req(c, 0, true, 'fwc')], 72_000))[0]!.remaining).toBe(6);
      // and independently, twice on one key: the second sees the first (4 + 4 + 4 = 12)
      const ds2 = await decide([req(c, 4, true, 'fwc'), req(c, 4, true, 'fwc')], 72_000, true);
      expect(ds2.map((d) => [d.allowed, d.remaining])).toEqual([
        [true, 2],
        [false, 2],
      ]);
      expect((await decide([req(c, 0, true, 'fwc')], 72_000))[0]).toMatchObject({
        allowed: false,
        remaining: 0,
      });
    });

    it('runs window algorithms on the same keys without mixing state', async () => {
      const k = key('fw');
      const ds = await decide([req(k, 10, true, 'fw')], 500_000);
      expect(ds[0]).toMatchObject({ allowed: true, remaining: 0 });
      expect((await decide([req(k, 1, true, 'fw')], 599_999))[0]).toMatchObject({
        allowed: false,
        retryAfterMs: 1,
      });
      expect((await decide([req(k, 1, true, 'fw')], 600_000))[0]).toMatchObject({
        allowed: true,
        remaining: 9,
      });
    });
  });
}
