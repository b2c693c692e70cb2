/**
 * REDIS_TIMEOUT against a real redis-server: a call that finds an earlier one unanswered
 * for that long (the server frozen with SIGSTOP) makes the store drop its connection and
 * open a new one; with the default (2 s) a shorter freeze keeps the same connection.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { startLoopbackService } from '../support/loopback-service.js';
import { sleep, waitFor } from '../support/wait.js';
import { call, connect } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures/statsd/stats.yaml');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
  await stopAllRedisServers();
});

const acme = { domain: 'stats', descriptors: [{ entries: [{ key: 'tenant', value: 'acme' }] }] };

/** The ids of the connections other than `admin`'s own. */
async function otherClients(admin: Redis): Promise<string[]> {
  const own = String(await admin.client('ID'));
  const list = String(await admin.client('LIST'));
  return [...list.matchAll(/^id=(\d+) /gm)].map((m) => m[1]!).filter((id) => id !== own);
}

/**
 * Freezes Redis, sends a call, another `ms` later, then thaws it; returns the ids of the
 * store's connections before and after.
 */
async function freezeDuringCall(redisTimeoutMs: number | undefined, ms: number) {
  const redis = await RedisServer.start();
  const admin = new Redis(redis.url);
  cleanup.push(() => admin.disconnect());
  const svc = await startLoopbackService({
    envoyConfig: config,
    redis: { type: 'single', url: redis.url },
    ...(redisTimeoutMs === undefined ? {} : { redisTimeoutMs }),
  });
  cleanup.push(() => svc.shutdown());
  const clients = connect(svc.grpcPort);
  cleanup.push(() => clients.close());
  await call(clients.rls, 'ShouldRateLimit', acme);
  const before = await otherClients(admin);
  process.kill(redis.pid, 'SIGSTOP'); // a process this test started
  try {
    // The store's deadline (100 ms) answers this call; the command stays unanswered.
    await call(clients.rls, 'ShouldRateLimit', acme).catch(() => undefined);
    await sleep(ms);
    // The next call finds the first one unanswered for `ms`.
    await call(clients.rls, 'ShouldRateLimit', acme).catch(() => undefined);
  } finally {
    process.kill(redis.pid, 'SIGCONT');
  }
  await waitFor(
    async () =>
      (
        await call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', acme).catch(
          () => undefined,
        )
      )?.overallCode,
    { what: 'the service deciding again', timeoutMs: 10_000 },
  );
  return { before, after: await otherClients(admin) };
}

describe('REDIS_TIMEOUT', () => {
  it('a call unanswered for REDIS_TIMEOUT (300 ms) makes the store reopen its connection', async () => {
    const { before, after } = await freezeDuringCall(300, 800);
    expect(before).toHaveLength(1);
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before[0]);
  });

  it('with the default (2 s), an 800 ms freeze keeps the same connection', async () => {
    const { before, after } = await freezeDuringCall(undefined, 800);
    expect(after).toEqual(before);
  });
});
