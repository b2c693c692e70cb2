/**
 * `Store.refund` (used by the token batch stage to give unspent units back on close) on
 * both stores: bounded by the algorithm's refund (never above capacity), once per
 * request id however often it is repeated, and nothing for a window that has passed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { algorithmOf } from '../../src/algorithms/index.js';
import { parsePolicies } from '../../src/config/policies.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import type { Store, StoreRequest } from '../../src/stores/store.js';
import { RedisServer } from '../support/redis-server.js';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.stop();
});

const bucket = parsePolicies([{ name: 'p', match: ['t'], rate: 1, period: '1h', burst: 20 }])
  .policies[0]!;
const window = parsePolicies([
  { name: 'w', match: ['t'], algorithm: 'fixed-window', limit: 20, window: '1s' },
]).policies[0]!;

function req(key: string, policy: typeof bucket, cost: number): StoreRequest {
  return {
    key,
    algorithm: algorithmOf(policy.algorithm),
    params: policy.params,
    cost,
    enforce: true,
  };
}

async function remaining(store: Store, r: StoreRequest, nowMs: number): Promise<number> {
  const [x] = await store.apply([{ ...r, cost: 0 }], { nowMs });
  return x!.ok ? x!.decision.remaining : NaN;
}

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  [
    'RedisStore',
    () => RedisStore.connect(`redis://127.0.0.1:${redis.port}`, { clock: 'client', prefix: 'rf' }),
  ],
];

describe.each(stores)('%s.refund', (_name, make) => {
  it('gives back once per request id, and never above capacity', async () => {
    const store = make();
    const key = `{a${_name}}:p`;
    const t = 1_700_000_000_000;
    await store.apply([req(key, bucket, 10)], { nowMs: t, requestId: 'r1' });
    expect(await remaining(store, req(key, bucket, 0), t)).toBeCloseTo(10, 3);
    for (let i = 0; i < 3; i++) {
      await store.refund!([req(key, bucket, 4)], { nowMs: t, consumedAtMs: t, requestId: 'r1' });
    }
    expect(await remaining(store, req(key, bucket, 0), t)).toBeCloseTo(14, 3);
    // Without an id each call gives back, but never above the burst of 20.
    await store.refund!([req(key, bucket, 4)], { nowMs: t, consumedAtMs: t });
    await store.refund!([req(key, bucket, 4)], { nowMs: t, consumedAtMs: t });
    expect(await remaining(store, req(key, bucket, 0), t)).toBeCloseTo(20, 3);
    await store.close();
  });

  it('gives nothing back to a window that has passed', async () => {
    const store = make();
    const key = `{b${_name}}:w`;
    const t = 1_700_000_000_000;
    await store.apply([req(key, window, 5)], { nowMs: t });
    await store.apply([req(key, window, 5)], { nowMs: t + 1_000 });
    await store.refund!([req(key, window, 5)], { nowMs: t + 1_000, consumedAtMs: t });
    expect(await remaining(store, req(key, window, 0), t + 1_000)).toBe(15);
    await store.close();
  });
});
