/**
 * Reserve and settle on a real Redis (docs/costs.md): issue 29's exact accounting over
 * several connections, a settle retried and one whose reply was lost applying once, and
 * a reservation left unsettled staying at its estimate after its ttl. The stores run in
 * client-clock mode under a frozen ManualClock, so nothing refills between steps and
 * every figure is exact; one test runs on the server clock. The memory store's
 * counterparts are test/limiter/reserve.test.ts and exact-accounting.test.ts.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../../src/config/policies.js';
import { ManualClock } from '../../../src/core/clock.js';
import { StoreError, type PolicyError } from '../../../src/core/errors.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { accountingPolicy, runExactAccounting } from '../../support/exact-accounting.js';
import { closeAllFaultProxies, FaultProxy } from '../../support/fault-proxy.js';
import { RedisServer } from '../../support/redis-server.js';
import { waitFor } from '../../support/wait.js';

const T0 = 1_700_000_000_000;
const tokens: PolicyInput = {
  name: 'model-tokens',
  match: ['tenant'],
  rate: 1,
  period: '1h',
  burst: 100,
  timeout: '2s',
};

let server: RedisServer;
const stores: RedisStore[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await closeAllFaultProxies();
  await server?.stop();
});

/** A store with its own connection to `port` (the server, or a proxy in front of it). */
function store(prefix: string, clock: 'client' | 'server' = 'client', port = server.port) {
  const s = new RedisStore({
    client: new Redis({ host: server.host, port, lazyConnect: true, retryStrategy: () => 25 }),
    clock,
    prefix,
  });
  stores.push(s);
  return s;
}

describe('reserve and settle on Redis', () => {
  for (const seed of [1, 2]) {
    it(`exact accounting: 64 clients over 4 connections consume the admitted actuals, within burst + maxDebt (seed ${seed})`, async () => {
      const clock = new ManualClock(T0);
      const policies = [accountingPolicy(5_000, 50)];
      const limiters = Array.from({ length: 4 }, () =>
        createLimiter({ store: store(`acct${seed}`), policies, clock }),
      );
      const r = await runExactAccounting(limiters, {
        clients: 64,
        rounds: 16,
        burst: 5_000,
        maxDebt: 50,
        seed,
        overshoot: 4,
      });
      // About (burst + maxDebt) / the mean actual (twice the mean estimate of 25.5): ~100.
      expect(r.admitted, JSON.stringify(r)).toBeGreaterThan(50);
      // It reached the cap: some excess was capped, or the bucket ended exactly at it.
      expect(r.capped > 0 || r.level === -50, JSON.stringify(r)).toBe(true);
    });
  }

  it('exact accounting below the cap: the units consumed are the sum of the actuals to the unit', async () => {
    const clock = new ManualClock(T0);
    const policies = [accountingPolicy(100_000, 2_000)];
    const limiters = Array.from({ length: 4 }, () =>
      createLimiter({ store: store('acct-below'), policies, clock }),
    );
    const r = await runExactAccounting(limiters, {
      clients: 64,
      rounds: 8,
      burst: 100_000,
      maxDebt: 2_000,
      seed: 4,
    });
    expect([r.denied, r.capped]).toEqual([0, 0]);
    expect(r.level).toBe(100_000 - r.actuals);
  });

  it('a retried settle, and one from another connection, apply once', async () => {
    const clock = new ManualClock(T0);
    const a = createLimiter({ store: store('retry'), policies: [tokens], clock });
    const b = createLimiter({ store: store('retry'), policies: [tokens], clock });
    const r = await a.reserve({ tenant: 'acme' }, { cost: 50 });
    expect((await b.settle(r.id, 10)).applied).toBe(true);
    const again = await r.settle(10);
    expect(again.applied).toBe(false);
    expect((await a.settle(r.id, 99)).applied).toBe(false);
    // 100 - 50 + 40, once.
    expect(again.decisions[0]!.remaining).toBe(90);
    expect((await b.check({ tenant: 'acme' }, { cost: 0 })).decision?.remaining).toBe(90);
  });

  it('a settle whose reply was lost rejects with a StoreError; the retry applies it once', async () => {
    const proxy = await FaultProxy.start({ host: server.host, port: server.port });
    const clock = new ManualClock(T0);
    const limiter = createLimiter({
      store: store('lost', 'client', proxy.port),
      policies: [tokens],
      clock,
    });
    const r = await limiter.reserve({ tenant: 'acme' }, { cost: 60 });
    // The settle script is loaded (a cancel of another reservation) before its reply is lost.
    await (await limiter.reserve({ tenant: 'warm' }, { cost: 1 })).cancel();
    proxy.dropNextReply({ thenReset: true });
    const lost = await r.settle(100).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(StoreError);
    // The connection comes back; each attempt until then fails alike and applies nothing new.
    const retried = await waitFor(async () => r.settle(100).catch(() => undefined), {
      what: 'a settle retried after the reconnect',
      timeoutMs: 10_000,
    });
    expect(retried.applied).toBe(false);
    // Applied once: 100 - 60 - 40 = 0, no debt.
    expect(retried.decisions[0]!.remaining).toBe(0);
    expect((await limiter.check({ tenant: 'acme' }, { cost: 1 })).retryAfterMs).toBe(3_600_000);
  });

  it('a reservation never settled stays at its estimate; after its ttl it can no longer be settled', async () => {
    const clock = new ManualClock(T0);
    const limiter = createLimiter({ store: store('ttl'), policies: [tokens], clock });
    const r = await limiter.reserve({ tenant: 'acme' }, { cost: 30, ttlMs: 5_000 });
    clock.advance(5_001);
    const err = (await r.settle(0).catch((e: unknown) => e)) as PolicyError;
    expect(err.code).toBe('SLUICE_ERR_RESERVATION_EXPIRED');
    expect((await limiter.check({ tenant: 'acme' }, { cost: 0 })).decision?.remaining).toBeCloseTo(
      70 + 5_001 / 3_600_000,
      9,
    );
  });

  it('on the server clock: a settle gives back and charges as on the client clock', async () => {
    const limiter = createLimiter({ store: store('server', 'server'), policies: [tokens] });
    const r = await limiter.reserve({ tenant: 'acme' }, { cost: 40 });
    // Real time refills one token per hour: a few ms of it are well under 0.01.
    expect((await r.settle(25)).decisions[0]!.remaining).toBeCloseTo(75, 2);
    const more = await limiter.reserve({ tenant: 'acme' }, { cost: 70 });
    const s = await more.settle(300);
    // 75 - 70 = 5 left; 230 more wanted: 100 below empty allowed (the burst), 125 capped.
    expect(s.cappedUnits).toBeCloseTo(125, 2);
  });
});
