/**
 * The token batch's store calls go through the limiter's store gateway, against a real
 * redis-server (behind a fault proxy that can freeze it: commands swallowed, no reply).
 * The caller's deadline bounds the whole batched check (reservation tries and the
 * fallback call together), and reservations that succeed tell the store's health
 * observer, so health recovers when only reservations reach the store. The refunds of
 * `close` go through it too: a frozen store cannot hold `close` past the policy timeout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { StoreError } from '../../src/core/errors.js';
import { type StoreCallEnd } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import type { TokenBatchStage } from '../../src/local/token-batch.js';
import { StoreHealth } from '../../src/service/store-health.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import { captureLog } from '../support/captured-log.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
  await stopAllRedisServers();
});

async function storeBehindProxy(): Promise<{ store: RedisStore; proxy: FaultProxy }> {
  const redis = await RedisServer.start();
  const proxy = await FaultProxy.start(redis);
  cleanup.push(() => proxy.close());
  const store = RedisStore.connect(proxy.url);
  cleanup.push(() => store.close());
  await store.ready();
  return { store, proxy };
}

/** A batched policy; its store timeout is `timeoutMs`. */
const batched = (timeoutMs: number) => ({
  name: 'api',
  match: ['tenant'],
  rate: 1_000,
  burst: 1_000,
  batch: { size: 8, ttl: '1s' },
  timeout: timeoutMs,
  failureMode: 'closed' as const,
});

describe('the token batch through the store gateway', () => {
  it("bounds a batched check by the caller's deadline, reservations included", async () => {
    const { store, proxy } = await storeBehindProxy();
    // The policies allow the store 1 s per call; the caller allows the check 60 ms.
    const POLICY_TIMEOUT_MS = 1_000;
    const ends: StoreCallEnd[] = [];
    const limiter = createLimiter({
      store,
      policies: [batched(POLICY_TIMEOUT_MS)],
      storeObserver: { answered: () => undefined, failed: (_e, endedBy) => ends.push(endedBy) },
    });
    cleanup.push(() => limiter.close());
    proxy.blackhole('both');
    const t0 = performance.now();
    const r = await limiter.check({ tenant: 'a' }, { timeoutMs: 60 });
    const elapsedMs = performance.now() - t0;
    expect(r.decisions[0]).toMatchObject({ path: 'fail-closed', status: 'UNAVAILABLE' });
    // Had any store call (a reservation try or the fallback) waited the policy timeout
    // instead of the caller's rest, the check could not have ended before it.
    expect(elapsedMs).toBeLessThan(POLICY_TIMEOUT_MS);
    // Every call the check made ended by the caller's deadline, none by the store.
    expect(ends.length).toBeGreaterThan(0);
    expect(ends.every((e) => e === 'deadline')).toBe(true);
    proxy.heal();
  });

  it('tells the health observer about reservations: health recovers when only they succeed', async () => {
    const redis = await RedisServer.start();
    const store = RedisStore.connect(redis.url);
    cleanup.push(() => store.close());
    await store.ready();
    const log = captureLog();
    const health = new StoreHealth({ log: log.logger });
    const clock = new ManualClock(0);
    const limiter = createLimiter({
      store,
      clock,
      policies: [batched(200)],
      storeObserver: {
        answered: () => health.answered(),
        failed: (e: StoreError, endedBy) => health.failed(e, endedBy),
      },
    });
    cleanup.push(() => limiter.close());
    // An outage: the reservation and the fallback call both fail.
    await redis.kill();
    expect((await limiter.check({ tenant: 'a' })).decisions[0]!.path).toBe('fail-closed');
    expect(health.failing).toBe(true);
    await redis.restart();
    // Past the stage's retry pause (1 s after a failed reservation), with the store back:
    // the check is answered from a fresh reservation, and the store is not called besides.
    clock.advance(2_000);
    let d = (await limiter.check({ tenant: 'a' })).decisions[0]!;
    for (let i = 0; d.path !== 'batch' && i < 50; i++) {
      // The client may still be reconnecting: each try waits for its store call to end,
      // then the next comes after the stage's retry pause.
      clock.advance(2_000);
      d = (await limiter.check({ tenant: 'a' })).decisions[0]!;
    }
    expect(d).toMatchObject({ path: 'batch', allowed: true });
    expect(health.failing).toBe(false);
    expect(log.matching('store healthy again')).toHaveLength(1);
  });

  it('bounds the refunds of close by the policy timeout, and tells the observer', async () => {
    const { store, proxy } = await storeBehindProxy();
    const ends: StoreCallEnd[] = [];
    let answered = 0;
    const limiter = createLimiter({
      store,
      policies: [batched(200)],
      storeObserver: { answered: () => answered++, failed: (_e, endedBy) => ends.push(endedBy) },
    });
    cleanup.push(() => limiter.close());
    // Slow start: the first check reserves 1 and spends it, the second reserves 2 and
    // spends 1: one unspent unit for close to give back.
    for (let i = 0; i < 2; i++) {
      expect((await limiter.check({ tenant: 'a' })).decisions[0]).toMatchObject({
        path: 'batch',
        allowed: true,
      });
    }
    expect(answered).toBe(2);
    const batch = limiter.stages.find((s) => s.name === 'batch') as TokenBatchStage;
    expect(batch.unitsHeld).toBe(1);
    // The store freezes: the refund gets no answer. Close ends anyway (had the refund
    // waited on the store, it would never end), with the refund failed by its timeout.
    proxy.blackhole('both');
    await limiter.close();
    expect(ends).toEqual(['store']);
    expect(batch.stats.unitsReturned).toBe(0);
    proxy.heal();
  });
});
