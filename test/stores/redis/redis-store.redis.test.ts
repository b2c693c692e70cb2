/**
 * RedisStore against a real redis-server. The shared store behaviour runs through the
 * conformance suite (test/stores/conformance.ts) in client-clock mode; what only Redis
 * has is tested here: the server clock (TIME), the stored state strings and their TTLs,
 * foreign keys, the sliding-log bound and the key layout in a real keyspace and its hash
 * slots. Concurrency and script loss have their own suites beside this one, and the Lua
 * ports are checked against the TypeScript transitions in the `*.diff.redis.test.ts` files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { Algorithm } from '../../../src/algorithms/algorithm.js';
import { fixedWindow, type FixedWindowParams } from '../../../src/algorithms/fixed-window.js';
import {
  tokenBucket,
  type TokenBucketParams,
  type TokenBucketState,
} from '../../../src/algorithms/token-bucket.js';
import type { AlgorithmDecision } from '../../../src/core/decision.js';
import { PolicyError, StoreError } from '../../../src/core/errors.js';
import type { PolicyInput } from '../../../src/config/policies.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { hashTagOf } from '../../../src/stores/key.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreRequest, StoreResult } from '../../../src/stores/store.js';
import { decidedByStore } from '../../support/check-results.js';
import { FaultProxy } from '../../support/fault-proxy.js';
import { RedisServer } from '../../support/redis-server.js';
import { packState, readState, STATE_CODE } from '../../support/redis-state.js';
import { sleep, waitFor } from '../../support/wait.js';
import { describeStore } from '../conformance.js';

describeStore('RedisStore (client clock)', async () => {
  const server = await RedisServer.start();
  const client = server.client();
  const store = new RedisStore({ client, clock: 'client' });
  return {
    store,
    reset: async () => {
      await client.flushdb();
    },
    close: async () => {
      await store.close();
      await server.stop();
    },
  };
});

function req<P>(alg: Algorithm<P, unknown>, params: P, key: string, cost: number): StoreRequest {
  return {
    key,
    algorithm: alg as Algorithm<unknown, unknown>,
    params,
    cost,
    enforce: true,
  };
}
const tbReq = (p: TokenBucketParams, key: string, cost: number): StoreRequest =>
  req(tokenBucket, p, key, cost);

function decisionOf(results: readonly StoreResult[], i = 0): AlgorithmDecision {
  const r = results[i];
  if (r === undefined) throw new Error(`no result ${i}`);
  if (!r.ok) throw r.error;
  return r.decision;
}

/** The Redis server clock, in ms (TIME has microseconds). */
async function serverNowMs(client: Redis): Promise<number> {
  const [sec, usec] = await client.time();
  return Number(sec) * 1000 + Number(usec) / 1000;
}

let server: RedisServer;
let client: Redis;
/** Server clock (the default). */
let store: RedisStore;
/** Client clock: `nowMs` decides. */
let clientClock: RedisStore;

beforeAll(async () => {
  server = await RedisServer.start();
  client = server.client();
  store = new RedisStore({ client });
  clientClock = new RedisStore({ client, clock: 'client', prefix: 'cc' });
});

afterAll(async () => {
  await store?.close();
  await clientClock?.close();
  await server?.stop();
});

describe('RedisStore: server clock (Redis TIME)', () => {
  const p: TokenBucketParams = { rate: 100, periodMs: 1_000, burst: 20 }; // 0.1 unit per ms

  it('refills by the time that passed on the Redis server, ignoring the caller nowMs', async () => {
    const key = '{server-clock}:tb';
    const t0 = performance.now();
    // nowMs 0 would mean "epoch" to a client-clock store; the server clock ignores it.
    const taken = decisionOf(await store.apply([tbReq(p, key, 20)], { nowMs: 0 }));
    const t1 = performance.now();
    expect(taken).toMatchObject({ allowed: true, remaining: 0 });
    await sleep(100); // the behaviour: time passes on the server's clock; the bounds use t0..t3, not 100
    const t2 = performance.now();
    const peek = decisionOf(await store.apply([tbReq(p, key, 0)], { nowMs: 0 }));
    const t3 = performance.now();
    // Each script read TIME somewhere inside its round trip, so the server-side elapsed
    // time lies in [t2 - t1, t3 - t0] (1 ms slack for the two clocks' granularity).
    expect(peek.remaining).toBeGreaterThanOrEqual(((t2 - t1 - 1) * p.rate) / p.periodMs);
    expect(peek.remaining).toBeLessThanOrEqual(Math.min(20, ((t3 - t0 + 1) * p.rate) / p.periodMs));
    expect(peek.remaining).toBeGreaterThan(9); // ~10 back after ~100 ms
  });

  it('clamps negative elapsed time: a state stamped in the future never refills', async () => {
    const key = '{server-clock}:future';
    const redisKey = store.redisKey(key);
    const tsMs = Math.floor(await serverNowMs(client)) + 60_000;
    await client.set(redisKey, packState(STATE_CODE['token-bucket'], 7, tsMs)); // tokens, tsMs

    const peek = decisionOf(await store.apply([tbReq(p, key, 0)], { nowMs: 0 }));
    expect(peek).toMatchObject({ allowed: true, remaining: 7 });
    // The state is as of tsMs: a full refill is reported from there (~60 s + 130 ms).
    expect(peek.resetAfterMs).toBeGreaterThan(59_000 + 130);
    expect(peek.resetAfterMs).toBeLessThanOrEqual(60_000 + 130);

    const took = decisionOf(await store.apply([tbReq(p, key, 1)], { nowMs: 0 }));
    expect(took).toMatchObject({ allowed: true, remaining: 6 });
    // Nothing was refilled and the later timestamp is kept, so the interval up to it is
    // never refilled twice.
    expect(await readState(client, redisKey, STATE_CODE['token-bucket'])).toEqual([6, tsMs]);
    // It expires a full refill after its own timestamp, not after now.
    const pttl = await client.pttl(redisKey);
    expect(pttl).toBeGreaterThan(59_000 + tokenBucket.ttlMs(p));
    expect(pttl).toBeLessThanOrEqual(60_000 + tokenBucket.ttlMs(p));

    const denied = decisionOf(await store.apply([tbReq(p, key, 10)], { nowMs: 0 }));
    expect(denied).toMatchObject({ allowed: false, status: 'OVER_LIMIT', remaining: 6 });
    // 4 missing units take 40 ms, counted from tsMs (~60 s away).
    expect(denied.retryAfterMs).toBeGreaterThan(59_000 + 40);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000 + 40);
  });
});

describe('RedisStore: stored state', () => {
  it('keeps fractional token-bucket state exact: the raw value is the double the TS transition computes', async () => {
    const p: TokenBucketParams = { rate: 0.7, periodMs: 1_000, burst: 5 };
    const key = '{fraction}:tb';
    const redisKey = clientClock.redisKey(key);
    const steps: [nowMs: number, cost: number][] = [
      [1_700_000_000_000.25, 5], // empty at a fractional instant
      [1_700_000_003_000.55, 1], // 3000.3 ms later: 2.10021 refilled, 1.10021... left
      [1_700_000_004_234.875, 2], // + 1234.325 ms: 0.864... more, 1.964... fits 2? no: denied
      [1_700_000_005_111.1, 2], // + 876.225 ms: fits, a fraction left
      [1_700_000_005_111.1, 0], // a read: writes nothing
    ];
    let state: TokenBucketState | undefined;
    for (const [nowMs, cost] of steps) {
      const expected = tokenBucket.transition(state, nowMs, cost, p);
      const got = decisionOf(await clientClock.apply([tbReq(p, key, cost)], { nowMs }));
      // Same operations on the same doubles: equal to the last bit, not just close.
      expect(got).toEqual(expected.decision);
      if (expected.decision.allowed && cost > 0) state = expected.state;
      const raw = await readState(client, redisKey, STATE_CODE['token-bucket']);
      const [tokens, tsMs] = raw ?? [];
      expect(Object.is(tokens, state!.tokens), `${raw} vs ${JSON.stringify(state)}`).toBe(true);
      expect(Object.is(tsMs, state!.tsMs), `${raw} vs ${JSON.stringify(state)}`).toBe(true);
    }
    // The run really did carry fractions (not integers) through Redis.
    expect(Number.isInteger(state!.tokens)).toBe(false);
    expect(Number.isInteger(state!.tsMs)).toBe(false);
  });

  it('expires a token bucket once an empty bucket would have refilled: PTTL = ceil(burst × period / rate)', async () => {
    const p: TokenBucketParams = { rate: 3, periodMs: 1_000, burst: 20 }; // 6666.67 ms
    const ttl = tokenBucket.ttlMs(p);
    expect(ttl).toBe(6_667);
    const key = '{ttl}:tb';
    const t0 = performance.now();
    await store.apply([tbReq(p, key, 1)], { nowMs: 0 });
    const pttl = await client.pttl(store.redisKey(key));
    const elapsed = performance.now() - t0;
    expect(pttl).toBeLessThanOrEqual(ttl);
    expect(pttl).toBeGreaterThanOrEqual(ttl - Math.ceil(elapsed) - 1);

    // And it really goes: a 20 ms bucket is gone shortly after.
    const short: TokenBucketParams = { rate: 100, periodMs: 1_000, burst: 2 };
    const gone = '{ttl}:short';
    await store.apply([tbReq(short, gone, 2)], { nowMs: 0 });
    expect(await client.pttl(store.redisKey(gone))).toBeLessThanOrEqual(20);
    await waitFor(
      async () => ((await client.exists(store.redisKey(gone))) === 0 ? true : undefined),
      { what: 'the 20 ms bucket to expire', timeoutMs: 2_000, intervalMs: 5 },
    );
  });

  it('expires a fixed-window key at the end of its window (client clock)', async () => {
    const p: FixedWindowParams = { limit: 10, windowMs: 10_000 };
    const windowStart = 170_000 * p.windowMs;
    for (const [offsetMs, expectMs] of [
      [2_500, 7_500],
      [9_999, 1],
      [0, 10_000],
    ] as const) {
      const key = `{fw-ttl}:at-${offsetMs}`;
      const t0 = performance.now();
      const d = decisionOf(
        await clientClock.apply([req(fixedWindow, p, key, 3)], { nowMs: windowStart + offsetMs }),
      );
      expect(d).toMatchObject({ allowed: true, remaining: 7, resetAfterMs: expectMs });
      const stored = await readState(client, clientClock.redisKey(key), STATE_CODE['fixed-window']);
      // a key with 1 ms to live may be gone before a loaded machine reads it
      if (expectMs > 1 || stored !== null) expect(stored).toEqual([windowStart / p.windowMs, 3]);
      const pttl = await client.pttl(clientClock.redisKey(key));
      const elapsed = performance.now() - t0;
      if (expectMs > 1) {
        expect(pttl).toBeLessThanOrEqual(expectMs);
        expect(pttl).toBeGreaterThanOrEqual(expectMs - Math.ceil(elapsed) - 1);
      } else {
        expect(pttl).toBeLessThanOrEqual(1); // 1 ms left (or already gone: -2)
      }
    }
  });

  it('expires a fixed-window key at the end of its window (server clock)', async () => {
    const p: FixedWindowParams = { limit: 10, windowMs: 60_000 };
    // Retried when the run straddles a window boundary (rare).
    for (let attempt = 0; ; attempt++) {
      const key = `{fw-ttl}:server-${attempt}`;
      const before = await serverNowMs(client);
      await store.apply([req(fixedWindow, p, key, 1)], { nowMs: 0 });
      const pttl = await client.pttl(store.redisKey(key));
      const after = await serverNowMs(client);
      const window = Math.floor(before / p.windowMs);
      if (Math.floor(after / p.windowMs) !== window && attempt < 3) continue;
      const endMs = (window + 1) * p.windowMs;
      expect(await readState(client, store.redisKey(key), STATE_CODE['fixed-window'])).toEqual([
        window,
        1,
      ]);
      expect(pttl).toBeGreaterThanOrEqual(Math.floor(endMs - after) - 1);
      expect(pttl).toBeLessThanOrEqual(Math.ceil(endMs - before) + 1);
      break;
    }
  });
});

/** Calls of each command since the server started (INFO commandstats), by name. */
async function commandCalls(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('RedisStore: one call, one read and one write per key', () => {
  it('reads and writes a key once per script call, however many checks of it the call carries', async () => {
    const p: TokenBucketParams = { rate: 1, periodMs: 3_600_000, burst: 100 };
    const before = await commandCalls(client);
    const results = await Promise.all(
      Array.from({ length: 32 }, () => store.apply([tbReq(p, '{hot}:one', 1)], { nowMs: 0 })),
    );
    const after = await commandCalls(client);
    const d = (name: string): number => (after[name] ?? 0) - (before[name] ?? 0);
    const scripts = d('fcall') + d('evalsha') + d('eval');
    // Exact as ever: 32 distinct remainders, 99 down to 68.
    const remaining = results.map((r) => Math.floor(decisionOf(r).remaining));
    expect(remaining.sort((a, b) => b - a)).toEqual(Array.from({ length: 32 }, (_, i) => 99 - i));
    // Coalesced into a few calls, each reading and writing the key once.
    expect(scripts).toBeGreaterThan(1);
    expect(scripts).toBeLessThan(32);
    expect(d('get')).toBe(scripts);
    expect(d('set')).toBe(scripts);
  });
});

describe('RedisStore: a key that holds something else', () => {
  const p: TokenBucketParams = { rate: 100, periodMs: 1_000, burst: 20 };

  it('reports SLUICE_ERR_STORE_STATE_CORRUPT naming the key, and leaves every key of the batch untouched', async () => {
    const foreign = '{corrupt}:list';
    const neighbour = '{corrupt}:fresh';
    await client.lpush(store.redisKey(foreign), 'not-a-bucket');
    const results = await store.apply([tbReq(p, neighbour, 1), tbReq(p, foreign, 1)], {
      nowMs: 0,
    });
    expect(results).toHaveLength(2);
    for (const r of results) {
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.error).toBeInstanceOf(StoreError);
      expect(r.error.code).toBe('SLUICE_ERR_STORE_STATE_CORRUPT');
      expect(r.error.message).toContain(JSON.stringify(store.redisKey(foreign)));
    }
    expect(await client.type(store.redisKey(foreign))).toBe('list');
    expect(await client.lrange(store.redisKey(foreign), 0, -1)).toEqual(['not-a-bucket']);
    expect(await client.pttl(store.redisKey(foreign))).toBe(-1);
    // All-or-nothing: the first item fitted, yet nothing was written for it.
    expect(await client.exists(store.redisKey(neighbour))).toBe(0);
  });

  it('treats a string that is not a bucket state the same way', async () => {
    const key = '{corrupt}:string';
    const tb = STATE_CODE['token-bucket'];
    const values = [
      'hello',
      '7',
      '1 2 3',
      '7 abc',
      '',
      packState(tb, 5), // one number where the token bucket has two
      packState(tb, 5, 1, 2), // three
      Buffer.concat([packState(tb, 5, 1), Buffer.from([0])]), // a byte too many
      packState(9, 5, 1), // no algorithm has code 9
      packState(6, 5, 1), // sliding-log state is a sorted set, never a string
    ];
    for (const value of values) {
      await client.set(store.redisKey(key), value);
      const [r] = await store.apply([tbReq(p, key, 1)], { nowMs: 0 });
      expect(r).toMatchObject({ ok: false, error: { code: 'SLUICE_ERR_STORE_STATE_CORRUPT' } });
      expect(await client.getBuffer(store.redisKey(key))).toEqual(Buffer.from(value));
    }
  });

  it("reads another algorithm's state (the policy's algorithm was changed) as a fresh bucket, then replaces it", async () => {
    const key = '{corrupt}:other-algorithm';
    // A GCRA TAT an hour ahead would deny everything if it were read as anything.
    const tat = Math.floor(await serverNowMs(client)) + 3_600_000;
    await client.set(store.redisKey(key), packState(STATE_CODE.gcra, tat));
    const d = decisionOf(await store.apply([tbReq(p, key, 1)], { nowMs: 0 }));
    expect(d).toMatchObject({ allowed: true, remaining: p.burst - 1 });
    const state = await readState(client, store.redisKey(key), STATE_CODE['token-bucket']);
    expect(state?.[0]).toBe(p.burst - 1);
  });

  // Packed doubles can be NaN or ±inf: as state they would decide OVER_LIMIT with NaN
  // fields (never rewritten), refill to full, or fail the SET's expiry.
  it('treats a packed state with non-finite numbers as corrupt too', async () => {
    const key = '{corrupt}:non-finite';
    const seen: string[] = [];
    const cases: [number, number][] = [
      [NaN, 0],
      [-Infinity, 0],
      [Infinity, 0],
      [5, Infinity],
      [5, NaN],
    ];
    for (const [tokens, tsMs] of cases) {
      await client.set(store.redisKey(key), packState(STATE_CODE['token-bucket'], tokens, tsMs));
      const [r] = await store.apply([tbReq(p, key, 1)], { nowMs: 0 });
      seen.push(`${tokens} ${tsMs} → ${r!.ok ? JSON.stringify(r!.decision) : r!.error.code}`);
      await client.del(store.redisKey(key));
    }
    expect(seen).toEqual([
      'NaN 0 → SLUICE_ERR_STORE_STATE_CORRUPT',
      '-Infinity 0 → SLUICE_ERR_STORE_STATE_CORRUPT',
      'Infinity 0 → SLUICE_ERR_STORE_STATE_CORRUPT',
      '5 Infinity → SLUICE_ERR_STORE_STATE_CORRUPT',
      '5 NaN → SLUICE_ERR_STORE_STATE_CORRUPT',
    ]);
  });

  it('turns it into the failure mode through the Limiter, never OVER_LIMIT', async () => {
    const limiter = createLimiter({
      store,
      policies: [
        {
          name: 'corrupt-closed',
          match: ['tenant'],
          failureMode: 'closed',
          rate: 100,
          burst: 20,
          timeout: '5s',
        },
      ],
    });
    await client.hset(store.redisKey('{victim}:corrupt-closed'), 'f', 'v');
    const r = await limiter.check({ tenant: 'victim' });
    expect(r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(r.decisions[0]!.path).toBe('fail-closed');
    expect(await client.type(store.redisKey('{victim}:corrupt-closed'))).toBe('hash');
  });
});

describe('RedisStore: replicated acknowledgement of independent calls', () => {
  it('waits for the replica once per call that charged something, charged denials included', async () => {
    const primary = await RedisServer.start();
    const replica = await RedisServer.start({ replicaOf: primary });
    const store = new RedisStore({
      client: primary.client(),
      clock: 'client',
      replicatedAck: { replicas: 1, timeoutMs: 500 },
    });
    try {
      const counting = fixedWindow.chargingDenied!({ limit: 2, windowMs: 60_000 });
      const t = 1_700_000_010_000;
      const call = (costs: number[]) =>
        store.apply(
          costs.map((c, i) => req(fixedWindow, counting, `{ack${i}}:w`, c)),
          { nowMs: t, independent: true },
        );
      await call([1, 1]);
      expect(store.replicatedAckStats.waits).toBe(1);
      await call([0, 0]); // reads only: nothing to acknowledge
      expect(store.replicatedAckStats.waits).toBe(1);
      // both denied (1 + 5 > 2), and both charged: acknowledged
      const denied = await call([5, 5]);
      expect(denied.map((r) => r.ok && r.decision.allowed)).toEqual([false, false]);
      expect(store.replicatedAckStats).toMatchObject({ waits: 2, short: 0, failed: 0 });
      expect(await readState(replica.client(), 'sl:{ack0}:w', STATE_CODE['fixed-window'])).toEqual([
        28_333_333, 6,
      ]);
    } finally {
      await store.close();
      await replica.stop();
      await primary.stop();
    }
  });
});

describe('RedisStore: a new store under a burst', () => {
  it('answers calls made before its connection is ready, without an EventEmitter leak warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(`${w.name}: ${w.message}`);
    };
    process.on('warning', onWarning);
    const fresh = new RedisStore({ client });
    try {
      const p: TokenBucketParams = { rate: 1, periodMs: 3_600_000, burst: 100 };
      // A service that starts under traffic: 50 checks before the connection is up.
      const results = await Promise.all(
        Array.from({ length: 50 }, () => fresh.apply([tbReq(p, '{burst}:new', 1)], { nowMs: 0 })),
      );
      expect(results.filter((r) => r[0]!.ok && r[0]!.decision.allowed)).toHaveLength(50);
      await sleep(10); // process warnings are emitted on a later tick
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await fresh.close();
    }
  });
});

describe('RedisStore: sliding-log bound', () => {
  const audit = (limit: number): PolicyInput => ({
    name: 'audit',
    match: ['tenant'],
    algorithm: 'sliding-log',
    limit,
    window: '1m',
  });

  it('rejects a sliding-log limit above maxSlidingLogLimit in createLimiter and setPolicies', () => {
    expect(() => createLimiter({ store, policies: [audit(1_000)] })).not.toThrow();
    let error: unknown;
    try {
      createLimiter({ store, policies: [audit(1_001)] });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyError);
    expect(error).toMatchObject({ code: 'SLUICE_ERR_POLICY_UNSUPPORTED' });
    expect((error as Error).message).toMatch(/"audit".*1001.*maxSlidingLogLimit 1000/);

    const small = new RedisStore({ client, maxSlidingLogLimit: 10 });
    const limiter = createLimiter({ store: small, policies: [audit(10)] });
    expect(() => limiter.setPolicies([audit(11)])).toThrow(
      expect.objectContaining({ code: 'SLUICE_ERR_POLICY_UNSUPPORTED' }),
    );
    expect(limiter.policies[0]!.params['limit']).toBe(10); // the old set stays
    // Other algorithms have no such bound.
    expect(() =>
      createLimiter({
        store: small,
        policies: [
          { name: 'big', match: ['tenant'], algorithm: 'fixed-window', limit: 1e6, window: '1m' },
        ],
      }),
    ).not.toThrow();
  });
});

/**
 * The key-encoding rule of docs/redis.md, written out independently of src/stores/key.ts:
 * UTF-8 bytes outside `A-Z a-z 0-9 - _ . ! ~ * ' ( )` become `%XX` (upper-case hex).
 */
function encodeRule(s: string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.!~*'()]/.test(c)
      ? c
      : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** A value as keys write it: encoded by the rule, the empty value as `=` (never `{}`). */
function part(v: string): string {
  return v === '' ? '=' : encodeRule(v);
}

describe('RedisStore: injective keys with hostile descriptor values', () => {
  // Values that break naive key building: braces move a naive hash tag, `:` `=` `&` fake
  // separators, newlines and spaces, percent signs that look already encoded, non-ASCII,
  // and 10 KB values. ('x&user=y', '') and ('x', 'y&user=') collide if `&` and `=` are
  // not escaped.
  const VALUES = [
    'x',
    'y&user=',
    'x&user=y',
    '',
    '{x}',
    '}:{',
    '{',
    'a\nb',
    'a b',
    'a%20b',
    'a+b',
    'x}:per-tenant',
    'tenant=x',
    '😀é',
    'x'.repeat(10_000),
    `${'x'.repeat(10_000)}}`,
  ];
  const slow = { rate: 1, period: '1h', burst: 100, timeout: '10s' } as const;
  const policies: PolicyInput[] = [
    { name: 'per-tenant', match: ['tenant'], ...slow },
    { name: 'per-route', match: ['tenant', 'route'], ...slow }, // identity tenant, scope route
    { name: 'per-pair', match: ['tenant', 'user'], identity: ['tenant', 'user'], ...slow },
  ];
  const tuples = VALUES.flatMap((a) => VALUES.map((b) => [a, b] as const));
  let keysServer: RedisServer;
  let keys: Redis;
  let slots: RedisServer;
  let slotClient: Redis;
  /** Every key the first test left in Redis. */
  const stored = new Set<string>();

  beforeAll(async () => {
    [keysServer, slots] = await Promise.all([
      RedisServer.start(),
      RedisServer.start({ cluster: true }), // CLUSTER KEYSLOT needs cluster mode
    ]);
    keys = keysServer.client();
    slotClient = slots.client();
  });

  afterAll(async () => {
    await keysServer?.stop();
    await slots?.stop();
  });

  it('gives every distinct (policy, values) its own bucket, keyed prefix:{identity}:policy[:scope]', async () => {
    const hostile = new RedisStore({ client: keys });
    const limiter = createLimiter({
      store: hostile,
      policies,
      maxDescriptorValueLength: 20_000,
    });
    const check = ([a, b]: readonly [string, string], cost: number) =>
      limiter.check({ tenant: a, route: b, user: b }, { cost });
    // One unit from every (tenant, route/user) pair: each per-route and per-pair bucket
    // once, each tenant bucket once per pair with that tenant.
    const consumed = await Promise.all(tuples.map((t) => check(t, 1)));
    expect(consumed.every((r) => r.allowed && decidedByStore(r))).toBe(true);
    const peeks = await Promise.all(tuples.map((t) => check(t, 0)));
    for (const r of peeks) {
      const remaining = Object.fromEntries(r.decisions.map((d) => [d.policy, d.remaining]));
      // Shared buckets would show more consumption; less than 0.01 refilled per hour.
      expect(remaining['per-tenant']).toBeGreaterThanOrEqual(100 - VALUES.length);
      expect(remaining['per-tenant']).toBeLessThan(100 - VALUES.length + 0.01);
      expect(remaining['per-route']).toBeGreaterThanOrEqual(99);
      expect(remaining['per-route']).toBeLessThan(99.01);
      expect(remaining['per-pair']).toBeGreaterThanOrEqual(99);
      expect(remaining['per-pair']).toBeLessThan(99.01);
    }

    // The keyspace holds exactly the keys the documented rule gives, nothing else.
    const expected = new Set<string>();
    for (const [a, b] of tuples) {
      expected.add(`sl:{${part(a)}}:per-tenant`);
      expected.add(`sl:{${part(a)}}:per-route:${part(b)}`);
      expected.add(`sl:{${part(a)}&${part(b)}}:per-pair`);
    }
    expect(expected.size).toBe(VALUES.length + 2 * tuples.length);
    let cursor = '0';
    do {
      const [next, batch] = await keys.scan(cursor, 'COUNT', 1_000);
      for (const k of batch) stored.add(k);
      cursor = next;
    } while (cursor !== '0');
    expect(stored.size).toBe(expected.size);
    expect([...stored].filter((k) => !expected.has(k))).toEqual([]);
    // Printable ASCII only: no raw newline, space or multi-byte character in a key.
    expect([...stored].filter((k) => !/^[\x21-\x7e]+$/.test(k))).toEqual([]);
    await hostile.close();
  });

  it('puts one tenant’s buckets in one hash slot: the hash tag of every stored key is its encoded identity', async () => {
    expect(stored.size).toBe(VALUES.length + 2 * tuples.length); // from the test above
    const keySlot = (k: string): Promise<number> =>
      slotClient.call('CLUSTER', 'KEYSLOT', k).then(Number);
    const byTag = new Map<string, string[]>();
    for (const k of stored) {
      const tag = hashTagOf(k);
      byTag.set(tag, [...(byTag.get(tag) ?? []), k]);
    }
    const tenantSlots = new Set<number>();
    for (const a of VALUES) {
      // per-tenant and per-route have identity [tenant]: one tag, one slot, 1 + 16 keys.
      const identity = part(a);
      const own = byTag.get(identity) ?? [];
      expect(own.sort()).toEqual(
        [
          `sl:{${identity}}:per-tenant`,
          ...VALUES.map((b) => `sl:{${identity}}:per-route:${part(b)}`),
        ].sort(),
      );
      const slot = await keySlot(identity);
      expect(await Promise.all(own.map(keySlot))).toEqual(own.map(() => slot));
      tenantSlots.add(slot);
      // per-pair has identity [tenant, user]: its tag is both, encoded.
      for (const b of VALUES) {
        const pair = `${part(a)}&${part(b)}`;
        expect(byTag.get(pair)).toEqual([`sl:{${pair}}:per-pair`]);
        expect(await keySlot(`sl:{${pair}}:per-pair`)).toBe(await keySlot(pair));
      }
    }
    // Every tag is one of those identities, and different tenants spread over slots.
    expect(byTag.size).toBe(VALUES.length + tuples.length);
    expect(tenantSlots.size).toBeGreaterThan(VALUES.length / 2);
    console.log(
      `[redis-store] ${stored.size} keys from ${VALUES.length} hostile values (${tuples.length} pairs × 3 policies): ` +
        `${byTag.size} hash tags, each the encoded identity; ${VALUES.length} tenants in ${tenantSlots.size} distinct slots`,
    );
  });
});

describe('RedisStore: close() on a frozen Redis', () => {
  it('gives QUIT up after stuckAfterMs and disconnects, so a shutdown never hangs', async () => {
    const server = await RedisServer.start();
    const proxy = await FaultProxy.start(server);
    try {
      const store = RedisStore.connect(proxy.url, { stuckAfterMs: 300 });
      await store.ready();
      proxy.blackhole('both'); // QUIT is swallowed and never answered
      const t0 = performance.now();
      await store.close();
      const closedMs = performance.now() - t0;
      console.log(
        `[redis-store] close() on a frozen Redis returned after ${closedMs.toFixed(0)} ms`,
      );
      expect(closedMs).toBeGreaterThanOrEqual(290);
      expect(closedMs).toBeLessThan(5_000);
    } finally {
      await proxy.close();
      await server.stop();
    }
  });
});
