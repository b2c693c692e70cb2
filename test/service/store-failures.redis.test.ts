/**
 * The service against a real Redis that fails in the ways production Redis fails: a key
 * of the wrong type, out of memory, frozen (fault proxy), killed and restarted. Each
 * failure is answered through the rule's failure mode (UNAVAILABLE for envoy rules),
 * counted by reason in `sluice_store_errors_total` and in `sluice_decisions_total`,
 * and logged once when the store starts failing and once when it recovers, never per
 * call.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { captureLog, LOG_LEVEL, type CapturedLog } from '../support/captured-log.js';
import type { FaultProxy } from '../support/fault-proxy.js';
import { sumOf } from '../support/prometheus-text.js';
import type { RedisServer } from '../support/redis-server.js';
import { startServiceBehindProxy } from '../support/service-behind-proxy.js';
import { svcRequest } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';
import { call, connect, type Clients } from './grpc/client.js';

let redis: RedisServer;
let admin: Redis;
let proxy: FaultProxy;
let svc: RunningService;
let clients: Clients;
let log: CapturedLog;

/** One ShouldRateLimit: the overall code, or the gRPC status name of the error. */
async function ask(tenant: string): Promise<string> {
  return call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', svcRequest(tenant)).then(
    (r) => r.overallCode,
    (e: grpc.ServiceError) => grpc.status[e.code] ?? String(e.code),
  );
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  return sumOf((await svc.metrics.metrics()).body, name, labels);
}

const failingLines = () => log.matching('store failing: ');
const healthyLines = () => log.matching('store healthy again');

beforeAll(async () => {
  log = captureLog('info');
  ({ redis, proxy, svc } = await startServiceBehindProxy({
    envoyConfig: join(import.meta.dirname, 'fixtures/redis-svc'),
    logger: log.logger,
  }));
  admin = redis.client();
  clients = connect(svc.grpcPort);
});
afterAll(async () => {
  clients?.close();
  await svc?.shutdown();
  await proxy?.close();
  await redis?.stop();
});

describe('store failures in the service', () => {
  it('counts each failure by reason, answers UNAVAILABLE, and logs each episode twice: failing, then healthy', async () => {
    expect(await ask('fine')).toBe('OK');
    // The rule's bucket key for a tenant, from the one the healthy call wrote.
    const [fineKey] = await admin.keys('sl:{fine}:*');
    const keyOf = (tenant: string) => fineKey!.replace('{fine}', `{${tenant}}`);
    const episodes: { reason: string; failed: number }[] = [];
    const failedCalls = async (tenant: string, n: number): Promise<number> => {
      let failed = 0;
      for (let i = 0; i < n; i++) {
        const code = await ask(tenant);
        expect(code).toBe('UNAVAILABLE');
        failed++;
      }
      return failed;
    };

    // WRONGTYPE: the tenant's bucket key holds a list.
    await admin.lpush(keyOf('wrongtype'), 'not a bucket');
    episodes.push({ reason: 'wrongtype', failed: await failedCalls('wrongtype', 2) });
    expect(await ask('fine')).toBe('OK');

    // Out of memory: Redis refuses the script's writes.
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    episodes.push({ reason: 'oom', failed: await failedCalls('oom', 3) });
    await admin.config('SET', 'maxmemory', '0');
    expect(await ask('fine')).toBe('OK');

    // Frozen: the connection stays up, nothing comes back.
    proxy.blackhole('both');
    episodes.push({ reason: 'timeout', failed: await failedCalls('frozen', 2) });
    proxy.heal();
    proxy.resetAll(); // the swallowed commands would leave the reply stream out of step
    let recovering = 0;
    await waitFor(
      async () => {
        const code = await ask('fine');
        if (code === 'OK') return true;
        recovering++;
        return undefined;
      },
      { what: 'the store back after the freeze', timeoutMs: 10_000, intervalMs: 50 },
    );
    episodes[episodes.length - 1]!.failed += recovering;

    // Killed: the connection is refused until Redis is back.
    await redis.kill();
    let down = await failedCalls('down', 2);
    await redis.restart();
    await waitFor(
      async () => {
        const code = await ask('fine');
        if (code === 'OK') return true;
        down++;
        return undefined;
      },
      { what: 'the store back after the restart', timeoutMs: 15_000, intervalMs: 50 },
    );
    episodes.push({ reason: 'connection', failed: down });

    const counted = Object.fromEntries(
      await Promise.all(
        ['wrongtype', 'oom', 'timeout', 'connection'].map(
          async (reason) =>
            [reason, await metric('sluice_store_errors_total', { reason })] as const,
        ),
      ),
    );
    const totalFailed = episodes.reduce((n, e) => n + e.failed, 0);
    const failClosed = await metric('sluice_decisions_total', {
      status: 'UNAVAILABLE',
      path: 'fail-closed',
    });
    console.log(
      `[store-failures] episodes ${episodes.map((e) => `${e.reason}: ${e.failed} failed calls`).join(', ')}; sluice_store_errors_total ${JSON.stringify(counted)}; fail-closed decisions ${failClosed}; log lines: ${failingLines().length} failing, ${healthyLines().length} healthy again`,
    );

    // Counted by reason. The frozen and killed episodes may mix timeout and connection
    // (a call can time out just before the watchdog or the kill drops the link).
    expect(counted['wrongtype']).toBe(2);
    expect(counted['oom']).toBe(3);
    expect(counted['timeout']! + counted['connection']!).toBe(
      episodes[2]!.failed + episodes[3]!.failed,
    );
    expect(counted['timeout']).toBeGreaterThanOrEqual(2);
    expect(counted['connection']).toBeGreaterThanOrEqual(2);
    expect(await metric('sluice_store_errors_total')).toBe(totalFailed);
    // Every failed call is a decision too: the rule failed closed.
    expect(failClosed).toBe(totalFailed);

    // Logged once per state change, with the reason and then the count meanwhile.
    expect(failingLines().map((l) => [l['level'], l['reason']])).toEqual([
      [LOG_LEVEL.error, 'wrongtype'],
      [LOG_LEVEL.error, 'oom'],
      [LOG_LEVEL.error, 'timeout'],
      [LOG_LEVEL.error, 'connection'],
    ]);
    expect(healthyLines().map((l) => [l['level'], l['failures']])).toEqual(
      episodes.map((e) => [LOG_LEVEL.info, e.failed]),
    );
    expect(healthyLines()[0]!['reasons']).toEqual({ wrongtype: 2 });
    expect(healthyLines()[1]!['reasons']).toEqual({ oom: 3 });
  });
});
