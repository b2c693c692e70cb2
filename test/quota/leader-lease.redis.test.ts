import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaderLease } from '../../src/quota/leader-lease.js';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';

// The leader lease on a real redis-server: one leader at a time, tokens that only grow,
// and a deposed leader that can neither renew nor overwrite its successor's state.
let redis: RedisServer;
let conn: Redis;
beforeAll(async () => {
  redis = await RedisServer.start();
  conn = new Redis(redis.url);
});
afterAll(async () => {
  conn.disconnect();
  await redis.stop();
});

describe('LeaderLease', () => {
  it('elects one leader; the next gets a higher token once the term lapses; the old one is fenced off', async () => {
    const a = new LeaderLease(conn, 'lease-test', 'a', 60_000);
    const b = new LeaderLease(conn, 'lease-test', 'b', 60_000);
    expect(await a.acquire()).toBe(1);
    expect(await b.acquire()).toBe(0);
    expect(await a.writeState('{"from":"a"}')).toBe(true);
    expect(await a.renew()).toBe(true);

    // The term lapses (as if a stopped renewing for the whole TTL): the key is gone.
    await conn.del('{lease-test}:leader');
    expect(await b.acquire()).toBe(2);
    expect(b.token).toBe(2);

    // a still believes it leads: every fenced write is refused, and it learns it lost.
    expect(await a.writeState('{"from":"a, deposed"}')).toBe(false);
    expect(a.token).toBe(0);
    expect(await a.renew()).toBe(false);
    expect(await b.readState()).toBe('{"from":"a"}');
    expect(await b.writeState('{"from":"b"}')).toBe(true);
    expect(await conn.get('{lease-test}:leader')).toBe('2:b');

    // Resigning frees the key at once; the next term's token is higher again.
    await b.resign();
    expect(await a.acquire()).toBe(3);
  });

  it('takes back a key that ran out while no one took a term since, never one a successor took', async () => {
    const a = new LeaderLease(conn, 'reclaim-test', 'a', 60_000);
    const b = new LeaderLease(conn, 'reclaim-test', 'b', 60_000);
    expect(await a.acquire()).toBe(1);
    // Its loop held past E: the key ran out, and no one campaigned meanwhile.
    await conn.del('{reclaim-test}:leader');
    expect(await a.renew()).toBe(true);
    expect(await conn.get('{reclaim-test}:leader')).toBe('1:a');
    expect(await conn.pttl('{reclaim-test}:leader')).toBeGreaterThan(0);
    expect(await b.acquire()).toBe(0);
    // Ran out again, and b took a term (the token moved on): a's term is gone for good,
    // also once b's key is gone in turn.
    await conn.del('{reclaim-test}:leader');
    expect(await b.acquire()).toBe(2);
    await conn.del('{reclaim-test}:leader');
    expect(await a.renew()).toBe(false);
    expect(await conn.get('{reclaim-test}:leader')).toBeNull();
    // And after a FLUSHALL-like loss of the token, no reclaim either.
    expect(await b.acquire()).toBe(3);
    await conn.del('{reclaim-test}:leader', '{reclaim-test}:token');
    expect(await b.renew()).toBe(false);
  });

  it('lets the key expire on its own when the leader stops renewing', async () => {
    // 2 s, not less: the TTL read below must come before the key expires even when the
    // machine's cores are busy (a 150 ms key could be gone by then, PTTL -2).
    const ttlMs = 2_000;
    const a = new LeaderLease(conn, 'expiry-test', 'a', ttlMs);
    const b = new LeaderLease(conn, 'expiry-test', 'b', ttlMs);
    expect(await a.acquire()).toBe(1);
    const ttl = await conn.pttl('{expiry-test}:leader');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(ttlMs);
    // While the key lives, b cannot lead; once it has expired (no renewal), b does.
    expect(await b.acquire()).toBe(0);
    const token = await waitFor(async () => (await b.acquire()) || undefined, {
      what: 'b to lead once the key expires',
      timeoutMs: ttlMs + 10_000,
      intervalMs: 20,
    });
    expect(token).toBe(2);
  });
});
