/**
 * Start-up before Redis can be used: nothing listening on its port yet, or a password it
 * rejects. The service opens its ports anyway, says why it waits (`waiting for Redis:
 * <reason>`, spaced out by a backoff), reports unhealthy on `/healthcheck` and gRPC
 * health, answers calls through the rule's failure mode, and turns healthy by itself
 * once Redis takes the connection.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../../src/service/main.js';
import { captureLog, LOG_LEVEL, type CapturedLog } from '../support/captured-log.js';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';
import { call, connect, type Clients } from './grpc/client.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(redisUrl: string, log: CapturedLog) {
  const t0 = performance.now();
  const svc = await startService({
    envoyConfig: join(import.meta.dirname, 'fixtures/redis-svc'),
    redis: { type: 'single', url: redisUrl },
    host: '127.0.0.1',
    grpcHost: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    logger: log.logger,
  });
  const startMs = performance.now() - t0;
  const clients = connect(svc.grpcPort);
  cleanups.push(() => svc.shutdown());
  cleanups.push(() => clients.close());
  return { svc, clients, startMs };
}

/** `/healthcheck` status and gRPC health for `ratelimit`, as probes see them. */
async function health(svc: RunningService, clients: Clients): Promise<[number, string]> {
  const http = (await fetch(`http://127.0.0.1:${svc.httpPort}/healthcheck`)).status;
  const status = await call<{ status: string }>(clients.health, 'Check', { service: 'ratelimit' });
  return [http, status.status];
}

async function ask(clients: Clients, tenant: string): Promise<string> {
  return call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', {
    domain: 'svc',
    descriptors: [{ entries: [{ key: 'tenant', value: tenant }] }],
  }).then(
    (r) => r.overallCode,
    (e: grpc.ServiceError) => grpc.status[e.code] ?? String(e.code),
  );
}

async function healthy(svc: RunningService, clients: Clients): Promise<void> {
  await waitFor(
    async (report) => {
      const h = await health(svc, clients);
      report(JSON.stringify(h));
      return h[0] === 200 && h[1] === 'SERVING' ? true : undefined;
    },
    { what: 'the service to turn healthy once Redis takes the connection', timeoutMs: 15_000 },
  );
}

describe('start-up while Redis cannot be used', () => {
  it('nothing listening yet: ports open, unhealthy, UNAVAILABLE, "waiting for Redis" with a backoff; healthy once redis-server starts there', async () => {
    const redis = await RedisServer.start();
    cleanups.push(() => redis.stop());
    await redis.kill(); // its port is known, and nothing listens there now
    const log = captureLog('info');
    const { svc, clients, startMs } = await start(redis.url, log);

    expect(await health(svc, clients)).toEqual([500, 'NOT_SERVING']);
    expect(await ask(clients, 'early')).toBe('UNAVAILABLE');
    // The first refused attempt is logged at once, later ones no more than the backoff lets.
    const waiting = await waitFor(
      () => {
        const lines = log.matching('waiting for Redis: ');
        return lines.length >= 2 ? lines : undefined;
      },
      { what: 'a second "waiting for Redis" line', timeoutMs: 10_000 },
    );
    expect(waiting[0]!['level']).toBe(LOG_LEVEL.warn);
    expect(waiting[0]!.msg).toContain('ECONNREFUSED');
    const gapMs = (waiting[1]!['time'] as number) - (waiting[0]!['time'] as number);
    expect(gapMs).toBeGreaterThanOrEqual(999); // 1 s apart; pino's times are whole ms
    // ioredis retried more often than the log spoke.
    expect(waiting[1]!['attempts'] as number).toBeGreaterThan(
      (waiting[0]!['attempts'] as number) + 1,
    );

    await redis.restart();
    await healthy(svc, clients);
    expect(await ask(clients, 'late')).toBe('OK');
    expect(log.matching('Redis connected')).toHaveLength(1);
    console.log(
      `[start-up] Redis down: startService resolved in ${startMs.toFixed(0)} ms with the ports open; ${waiting.length} "waiting for Redis" lines, the second ${gapMs} ms after the first (attempts ${String(waiting[0]!['attempts'])} then ${String(waiting[1]!['attempts'])}); healthy after restart`,
    );
  });

  it('a rejected password: ports open, unhealthy, "waiting for Redis: WRONGPASS …"; healthy once Redis accepts it', async () => {
    const redis = await RedisServer.start();
    const admin: Redis = redis.client();
    await admin.config('SET', 'requirepass', 'right'); // this connection stays authenticated
    cleanups.push(async () => {
      await admin.config('SET', 'requirepass', '');
      await redis.stop();
    });
    const log = captureLog('info');
    const url = new URL(redis.url);
    url.password = 'wrong';
    const { svc, clients } = await start(url.toString(), log);

    expect(await health(svc, clients)).toEqual([500, 'NOT_SERVING']);
    expect(await ask(clients, 'early')).toBe('UNAVAILABLE');
    const waiting = log.matching('waiting for Redis: ');
    expect(waiting.length).toBeGreaterThanOrEqual(1);
    expect(waiting[0]!.msg).toMatch(/^waiting for Redis: WRONGPASS /);
    expect(JSON.stringify(log.lines)).not.toContain('wrong@'); // the password is never logged

    await admin.config('SET', 'requirepass', 'wrong'); // now the service's password is right
    await healthy(svc, clients);
    expect(await ask(clients, 'late')).toBe('OK');
  });

  it('the per-second Redis is waited for as the main one: unhealthy while it is away, healthy once it starts (openStore opens both alike)', async () => {
    const main = await RedisServer.start();
    const perSecond = await RedisServer.start();
    cleanups.push(() => main.stop());
    cleanups.push(() => perSecond.stop());
    await perSecond.kill(); // the main Redis is up, the per-second one is not
    const log = captureLog('info');
    const svc = await startService({
      envoyConfig: join(import.meta.dirname, 'fixtures/redis-svc'),
      redis: { type: 'single', url: main.url },
      redisPerSecond: { type: 'single', url: perSecond.url },
      host: '127.0.0.1',
      grpcHost: '127.0.0.1',
      port: 0,
      grpcPort: 0,
      logger: log.logger,
    });
    const clients = connect(svc.grpcPort);
    cleanups.push(() => svc.shutdown());
    cleanups.push(() => clients.close());

    expect(await health(svc, clients)).toEqual([500, 'NOT_SERVING']);
    const waiting = await waitFor(
      () => {
        const lines = log.matching('waiting for Redis: ');
        return lines.length >= 1 ? lines : undefined;
      },
      { what: 'a "waiting for Redis" line for the per-second Redis', timeoutMs: 10_000 },
    );
    expect(waiting[0]!.msg).toContain('ECONNREFUSED');
    await perSecond.restart();
    await healthy(svc, clients);
    expect(log.matching('Redis connected')).toHaveLength(1);
    console.log(
      `[start-up] per-second Redis down: unhealthy with ${waiting.length} "waiting for Redis" line(s); healthy after it started`,
    );
  });
});
