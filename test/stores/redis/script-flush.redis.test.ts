/**
 * Script loss against a real redis-server: `SCRIPT FLUSH` under sustained traffic (on a
 * connection whose ACL user may not use FUNCTION, so the store runs scripts by EVALSHA),
 * `FUNCTION FLUSH` under sustained traffic (the store calls its function library by
 * FCALL), and a server restart (graceful and crash) between bursts. RedisStore never
 * hard-codes a SHA: ioredis sends EVALSHA and resends as EVAL on NOSCRIPT; a call that
 * finds no function goes again by EVALSHA while the library is loaded again. Callers must
 * see no error and the bucket must stay exact. Redis-only by nature.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { tokenBucket, type TokenBucketParams } from '../../../src/algorithms/token-bucket.js';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { parseInfo } from '../../support/resp.js';
import { addUserWithoutFunctions, RedisServer } from '../../support/redis-server.js';
import { sleep, waitFor } from '../../support/wait.js';

/** Capacity `burst`, refill 1 unit per hour: over a test run the capacity is the burst. */
const params = (burst: number): TokenBucketParams => ({ rate: 1, periodMs: 3_600_000, burst });

function req(key: string, burst: number, cost = 1): StoreRequest {
  return {
    key,
    algorithm: tokenBucket as Algorithm<unknown, unknown>,
    params: params(burst),
    cost,
    enforce: true,
  };
}

/** Every error of a batch result, as text. */
function errorsOf(results: readonly (readonly StoreResult[])[]): string[] {
  return results.flatMap((r) => r.flatMap((x) => (x.ok ? [] : [x.error.message])));
}

function admittedOf(results: readonly (readonly StoreResult[])[]): number {
  return results.filter((r) => r[0]?.ok === true && r[0].decision.allowed).length;
}

async function commandStats(client: Redis): Promise<Map<string, string>> {
  const text = (await client.info('commandstats')) + (await client.info('errorstats'));
  return parseInfo(text);
}

/** `calls=N` (or `count=N`) out of an INFO commandstats / errorstats line. */
function statCount(stats: Map<string, string>, field: string, what: 'calls' | 'count'): number {
  const m = new RegExp(`${what}=(\\d+)`).exec(stats.get(field) ?? '');
  return m ? Number(m[1]) : 0;
}

/** The flush tests: 8 stores (connections), 2,000 decisions on one bucket of 1,000. */
const CONNECTIONS = 8;
const DECISIONS = 2_000;
const BURST = 1_000;
const IN_FLIGHT_PER_CONNECTION = 5;

/** Every decision was made, none surfaced an error, and exactly the burst was admitted. */
function expectAllDecidedExactly(results: readonly (readonly StoreResult[])[]): void {
  const errors = errorsOf(results);
  expect(results).toHaveLength(DECISIONS);
  expect({ errors: errors.length, distinct: [...new Set(errors)] }).toEqual({
    errors: 0,
    distinct: [],
  });
  expect(admittedOf(results)).toBe(BURST);
}

/**
 * Runs `flush` every ~2 ms until the returned stop() is called; stop() resolves with the
 * number of flushes.
 */
function flushEvery2ms(flush: () => Promise<unknown>): () => Promise<number> {
  let done = false;
  let flushes = 0;
  const flushing = (async () => {
    while (!done) {
      await flush();
      flushes++;
      await sleep(2);
    }
  })();
  return async () => {
    done = true;
    await flushing;
    return flushes;
  };
}

/** `perStore` decisions on `key` from each store, a few in flight per store at a time. */
async function inWaves(
  stores: readonly RedisStore[],
  key: string,
  burst: number,
  perStore: number,
  inFlight: number,
): Promise<(readonly StoreResult[])[]> {
  const results: (readonly StoreResult[])[] = [];
  await Promise.all(
    stores.map(async (store) => {
      for (let sent = 0; sent < perStore; sent += inFlight) {
        const wave = Array.from({ length: Math.min(inFlight, perStore - sent) }, () =>
          store.apply([req(key, burst)], { nowMs: 0 }),
        );
        results.push(...(await Promise.all(wave)));
      }
    }),
  );
  return results;
}

describe('RedisStore survives SCRIPT FLUSH under sustained traffic', () => {
  let server: RedisServer;
  let stores: RedisStore[];
  let flusher: Redis;

  beforeAll(async () => {
    server = await RedisServer.start();
    flusher = server.client();
    // Without the FUNCTION command, the store cannot load its library: EVALSHA throughout.
    await addUserWithoutFunctions(flusher, 'scripts');
    stores = Array.from(
      { length: CONNECTIONS },
      () => new RedisStore({ client: server.client({ username: 'scripts', password: 'x' }) }),
    );
    await Promise.all(stores.map((s) => s.ready()));
  });

  afterAll(async () => {
    await Promise.all((stores ?? []).map((s) => s.close()));
    await server?.stop();
  });

  it(`${DECISIONS} decisions from ${CONNECTIONS} connections while SCRIPT FLUSH runs every ~2 ms: no error, exactly ${BURST} admitted`, async () => {
    await flusher.config('RESETSTAT');
    const stop = flushEvery2ms(() => flusher.script('FLUSH'));
    const startedAt = performance.now();
    const results = await inWaves(
      stores,
      '{flush}:bucket',
      BURST,
      DECISIONS / CONNECTIONS,
      IN_FLIGHT_PER_CONNECTION,
    );
    const elapsedMs = performance.now() - startedAt;
    const flushes = await stop();

    const stats = await commandStats(flusher);
    const noscript = statCount(stats, 'errorstat_NOSCRIPT', 'count');
    const evals = statCount(stats, 'cmdstat_eval', 'calls');
    const evalshas = statCount(stats, 'cmdstat_evalsha', 'calls');
    const errors = errorsOf(results);
    const admitted = admittedOf(results);
    console.log(
      `[script-flush] ${results.length} decisions in ${Math.round(elapsedMs)} ms, ${flushes} SCRIPT FLUSH, ` +
        `${noscript} NOSCRIPT replies recovered (${evals} EVAL, ${evalshas} EVALSHA), ` +
        `${errors.length} caller-visible errors, ${admitted} admitted of ${BURST}`,
    );
    // NOSCRIPT means the script did not run, so a retry is always safe: none may surface.
    expectAllDecidedExactly(results);
    // The flushes really did hit the traffic: scripts went missing and were re-sent.
    expect(flushes).toBeGreaterThan(10);
    expect(noscript).toBeGreaterThan(0);
    expect(evals).toBeGreaterThan(CONNECTIONS);
    expect(statCount(stats, 'cmdstat_fcall', 'calls')).toBe(0);
  });
});

describe('RedisStore survives FUNCTION FLUSH under sustained traffic', () => {
  let server: RedisServer;
  let stores: RedisStore[];
  let flusher: Redis;

  beforeAll(async () => {
    server = await RedisServer.start();
    stores = Array.from({ length: CONNECTIONS }, () => new RedisStore({ client: server.client() }));
    flusher = server.client();
    await Promise.all(stores.map((s) => s.ready()));
    // Every store has loaded (or found) its library before the traffic starts.
    await waitFor(
      async () => ((await flusher.call('FUNCTION', 'LIST')) as unknown[]).length > 0 || undefined,
      { what: 'the function library to be loaded', timeoutMs: 5_000, intervalMs: 10 },
    );
  });

  afterAll(async () => {
    await Promise.all((stores ?? []).map((s) => s.close()));
    await server?.stop();
  });

  it(`${DECISIONS} decisions from ${CONNECTIONS} connections while FUNCTION FLUSH runs every ~2 ms: no error, exactly ${BURST} admitted`, async () => {
    // A first decision per store, so each one has seen its library loaded.
    const key = '{fflush}:bucket';
    const results: (readonly StoreResult[])[] = [];
    for (const store of stores) results.push(await store.apply([req(key, BURST)], { nowMs: 0 }));
    await flusher.config('RESETSTAT');
    const stop = flushEvery2ms(() => flusher.call('FUNCTION', 'FLUSH'));
    results.push(
      ...(await inWaves(
        stores,
        key,
        BURST,
        (DECISIONS - CONNECTIONS) / CONNECTIONS,
        IN_FLIGHT_PER_CONNECTION,
      )),
    );
    const flushes = await stop();

    const stats = await commandStats(flusher);
    const fcalls = statCount(stats, 'cmdstat_fcall', 'calls');
    const failedFcalls = Number(
      /failed_calls=(\d+)/.exec(stats.get('cmdstat_fcall') ?? '')?.[1] ?? 0,
    );
    const loads = statCount(stats, 'cmdstat_function|load', 'calls');
    const evalshas = statCount(stats, 'cmdstat_evalsha', 'calls');
    const errors = errorsOf(results);
    const admitted = admittedOf(results);
    console.log(
      `[script-flush] ${results.length} decisions, ${flushes} FUNCTION FLUSH, ${fcalls} FCALL ` +
        `(${failedFcalls} found no function and went again by EVALSHA: ${evalshas} EVALSHA), ` +
        `${loads} library loads, ${errors.length} caller-visible errors, ${admitted} admitted of ${BURST}`,
    );
    // A missing function means the call did not run: the same holds.
    expectAllDecidedExactly(results);
    // The flushes hit the traffic: calls found no function, went by EVALSHA, and the
    // library was loaded again.
    expect(flushes).toBeGreaterThan(10);
    expect(failedFcalls).toBeGreaterThan(0);
    expect(evalshas).toBeGreaterThan(0);
    expect(loads).toBeGreaterThan(0);
  });
});

describe('RedisStore survives a redis-server restart without being recreated', () => {
  const BURST = 50;
  const ATTEMPTS = 100;
  let server: RedisServer;
  let store: RedisStore;

  beforeAll(async () => {
    server = await RedisServer.start();
    store = new RedisStore({ client: server.client() }); // server clock
  });

  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  async function burst(key: string): Promise<{ admitted: number; errors: string[] }> {
    const results = await Promise.all(
      Array.from({ length: ATTEMPTS }, () => store.apply([req(key, BURST)], { nowMs: 0 })),
    );
    return { admitted: admittedOf(results), errors: errorsOf(results) };
  }

  /** Waits until the same store answers again (a cost-0 read consumes nothing); ms taken. */
  async function reconnected(key: string): Promise<number> {
    const t0 = performance.now();
    await waitFor(
      async () => {
        const [r] = await store.apply([req(key, BURST, 0)], { nowMs: 0 });
        return r?.ok ? true : undefined;
      },
      { what: 'RedisStore to answer after the restart', timeoutMs: 15_000, intervalMs: 20 },
    );
    return performance.now() - t0;
  }

  it('decides exactly before and after a graceful restart and after a crash (SIGKILL) and restart', async () => {
    const key = '{restart}:bucket';
    const before = await burst(key);
    expect(before).toEqual({ admitted: BURST, errors: [] });

    await server.restart(); // SIGTERM, same port; persistence is off, so the bucket is gone
    const reconnectMs = await reconnected(key);
    const afterRestart = await burst(key);
    expect(afterRestart).toEqual({ admitted: BURST, errors: [] });

    await server.kill();
    await server.restart();
    const crashReconnectMs = await reconnected(key);
    const afterCrash = await burst(key);
    expect(afterCrash).toEqual({ admitted: BURST, errors: [] });
    console.log(
      `[script-flush] restart: ${ATTEMPTS} attempts at capacity ${BURST} → ${before.admitted} admitted before, ` +
        `${afterRestart.admitted} after a graceful restart (store answered again after ${Math.round(reconnectMs)} ms), ` +
        `${afterCrash.admitted} after SIGKILL + restart (after ${Math.round(crashReconnectMs)} ms), 0 errors`,
    );
  });
});
