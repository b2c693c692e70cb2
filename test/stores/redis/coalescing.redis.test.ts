/**
 * Concurrent checks share script calls (ScriptCoalescer + applyBatches.lua) against a real
 * redis-server: fewer calls than checks, each check still atomic and exact on its own, a
 * check that finds no call out goes at once, and one bad batch fails alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { tokenBucket } from '../../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { parseInfo } from '../../support/resp.js';
import { RedisServer } from '../../support/redis-server.js';

function req(key: string, burst: number): StoreRequest {
  return {
    key,
    algorithm: tokenBucket as Algorithm<unknown, unknown>,
    params: { rate: 1, periodMs: 3_600_000, burst },
    cost: 1,
    enforce: true,
  };
}

/** The remaining capacity of a one-request result, or the error code when it failed. */
function outcome(results: readonly StoreResult[]): number | string {
  const r = results[0]!;
  return r.ok ? r.decision.remaining : r.error.code;
}

/** Script calls (FCALL + EVALSHA + EVAL) Redis has run since the last CONFIG RESETSTAT. */
async function scriptCalls(client: Redis): Promise<number> {
  const stats = parseInfo(await client.info('commandstats'));
  const calls = (field: string): number =>
    Number(/calls=(\d+)/.exec(stats.get(field) ?? '')?.[1] ?? 0);
  return calls('cmdstat_fcall') + calls('cmdstat_evalsha') + calls('cmdstat_eval');
}

describe('RedisStore coalesces concurrent checks', () => {
  let server: RedisServer;
  let direct: Redis;
  let store: RedisStore;

  beforeAll(async () => {
    server = await RedisServer.start();
    direct = server.client();
    store = new RedisStore({ client: server.client(), maxBatchesPerCall: 16 });
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
    direct?.disconnect();
    await server?.stop();
  });

  it('300 concurrent checks on one bucket of 100: exactly 100 admitted, in far fewer calls, none above the bound', async () => {
    await store.apply([req('{co}:warm', 1)], { nowMs: 0 }); // script loaded before counting
    await direct.config('RESETSTAT');
    const results = await Promise.all(
      Array.from({ length: 300 }, () => store.apply([req('{co}:hot', 100)], { nowMs: 0 })),
    );
    const calls = await scriptCalls(direct);
    const admitted = results.filter((r) => r[0]!.ok && r[0]!.decision.allowed).length;
    console.log(`[coalescing] 300 concurrent checks: ${calls} script calls, ${admitted} admitted`);
    expect(results.every((r) => r[0]!.ok)).toBe(true);
    expect(admitted).toBe(100);
    // the first check finds no call out and goes alone; the rest go 16 to a call
    expect(calls).toBe(1 + Math.ceil(299 / 16));
  });

  it('splits a flush of four or more checks in two calls, so one runs while the other is decoded', async () => {
    await direct.config('RESETSTAT');
    const results = await Promise.all(
      Array.from({ length: 11 }, (_, i) => store.apply([req(`{co}:split-${i}`, 5)], { nowMs: 0 })),
    );
    expect(results.map(outcome)).toEqual(Array.from({ length: 11 }, () => 4));
    // 1 alone, then the 10 that queued behind it as 5 + 5 (below maxBatchesPerCall 16)
    expect(await scriptCalls(direct)).toBe(3);
    await direct.config('RESETSTAT');
    await Promise.all(
      Array.from({ length: 4 }, (_, i) => store.apply([req(`{co}:three-${i}`, 5)], { nowMs: 0 })),
    );
    // 1 alone, then 3 queued: fewer than four go together
    expect(await scriptCalls(direct)).toBe(2);
  });

  it('a lone check goes at once, in a call of its own', async () => {
    await direct.config('RESETSTAT');
    expect(outcome(await store.apply([req('{co}:lone', 5)], { nowMs: 0 }))).toBe(4);
    expect(await scriptCalls(direct)).toBe(1);
  });

  it('a batch on a foreign key fails alone; the batches sharing its call are decided', async () => {
    await direct.config('RESETSTAT');
    const foreignKey = store.redisKey('{co}:foreign');
    await direct.set(foreignKey, 'not sluice state'); // not a packed state (no algorithm code 110)
    const answers = await Promise.all([
      store.apply([req('{co}:a', 10)], { nowMs: 0 }),
      store.apply([req('{co}:foreign', 10)], { nowMs: 0 }),
      store.apply([req('{co}:b', 10)], { nowMs: 0 }),
      store.apply([req('{co}:c', 10)], { nowMs: 0 }),
    ]);
    // a went alone (no call out); the other three shared one call
    expect(answers.map(outcome)).toEqual([9, 'SLUICE_ERR_STORE_STATE_CORRUPT', 9, 9]);
    expect(await direct.get(foreignKey)).toBe('not sluice state');
    expect(await scriptCalls(direct)).toBe(2);
  });

  it('refuses a batch above what one call carries, alone: the batches sharing its call are decided', async () => {
    const huge = Array.from({ length: 65_535 }, (_, i) => req(`{co}:huge-${i}`, 5));
    const answers = await Promise.all([
      store.apply([req('{co}:before', 10)], { nowMs: 0 }),
      store.apply(huge, { nowMs: 0 }),
      store.apply([req('{co}:after', 10)], { nowMs: 0 }),
    ]);
    expect(answers.map(outcome)).toEqual([9, 'SLUICE_ERR_STORE_UNAVAILABLE', 9]);
    const r = answers[1]![0]!;
    expect(r.ok ? '' : r.error.message).toBe(
      'RedisStore: a batch of 65535 requests is above the 65534 one script call carries',
    );
    expect(answers[1]!.every((x) => !x.ok)).toBe(true);
  });

  it('refuses a maxBatchesPerCall that is not a positive integer', () => {
    expect(() => new RedisStore({ client: direct, maxBatchesPerCall: 0 })).toThrow(
      'RedisStore: maxBatchesPerCall must be a positive integer, got 0',
    );
  });
});
