/**
 * REDIS_PERSECOND against two real redis-servers: the rules whose unit is second are
 * decided in the per-second Redis, every other rule in the main one, also when one
 * request carries both.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { readServiceSettings } from '../../src/service/env-settings.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { spawnServe, stopServe } from '../support/sluice-serve.js';
import { call, connect } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures/persecond/persecond.yaml');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
  await stopAllRedisServers();
});

const entries = (pairs: Record<string, string>) =>
  Object.entries(pairs).map(([key, value]) => ({ entries: [{ key, value }] }));

describe('REDIS_PERSECOND', () => {
  it('sluice serve decides per-second rules in REDIS_PERSECOND_URL and the rest in REDIS_URL', async () => {
    const [main, perSecond] = [await RedisServer.start(), await RedisServer.start()];
    const [mainAdmin, perSecondAdmin] = [new Redis(main.url), new Redis(perSecond.url)];
    cleanup.push(() => mainAdmin.disconnect());
    cleanup.push(() => perSecondAdmin.disconnect());
    const serve = await spawnServe(['--config', config], {
      REDIS_URL: `127.0.0.1:${main.port}`,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: `127.0.0.1:${perSecond.port}`,
    });
    cleanup.push(() => stopServe(serve));
    const clients = connect(serve.grpcPort);
    cleanup.push(() => clients.close());
    const ask = async (pairs: Record<string, string>) =>
      (
        await call<{ overallCode: string; statuses: { limitRemaining: number }[] }>(
          clients.rls,
          'ShouldRateLimit',
          { domain: 'persec', descriptors: entries(pairs) },
        )
      ).statuses.map((s) => s.limitRemaining);

    // One request, both kinds of rule: each counted in its own Redis.
    expect(await ask({ ip: '10.0.0.1', user: 'ann' })).toEqual([49, 99]);
    expect(await mainAdmin.keys('*')).toEqual([expect.stringContaining('ann')]);
    expect(await perSecondAdmin.keys('*')).toEqual([expect.stringContaining('10.0.0.1')]);
    // Each kind alone goes to its own Redis only.
    expect(await ask({ user: 'bob' })).toEqual([99]);
    expect(await ask({ ip: '10.0.0.2' })).toEqual([49]);
    expect((await mainAdmin.keys('*')).sort()).toEqual([
      expect.stringContaining('ann'),
      expect.stringContaining('bob'),
    ]);
    expect(await perSecondAdmin.dbsize()).toBe(2);
    expect((await perSecondAdmin.keys('*')).some((k) => k.includes('bob'))).toBe(false);
  });

  it('REDIS_PERSECOND=true needs REDIS_PERSECOND_URL', () => {
    expect(() => readServiceSettings({ REDIS_PERSECOND: 'true' })).toThrow(
      /REDIS_PERSECOND_URL: required when REDIS_PERSECOND is true/,
    );
    expect(
      readServiceSettings({ REDIS_PERSECOND: 'true', REDIS_PERSECOND_URL: 'rl-fast:6379' })
        .redisPerSecond,
    ).toEqual({ type: 'single', url: 'redis://rl-fast:6379' });
  });
});
