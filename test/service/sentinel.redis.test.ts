/**
 * Redis Sentinel: a primary, a replica and three Sentinels, all redis-server processes
 * (`--sentinel` with a config file written by the harness). The service is started from
 * upstream's settings (`REDIS_TYPE=sentinel`, `REDIS_URL=<master name>,<sentinels>`,
 * `REDIS_SENTINEL_AUTH`), serves gRPC traffic, and the primary is killed by PID under it.
 * The test prints the unavailable window and the admissions against the limit; meanwhile
 * the rules (fail-closed, as upstream) answer UNAVAILABLE.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, afterEach, expect, it } from 'vitest';
import { readServiceSettings } from '../../src/service/env-settings.js';
import { startService } from '../../src/service/main.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { sleep, waitFor } from '../support/wait.js';
import { call, connect } from './grpc/client.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse())
    await Promise.resolve()
      .then(c)
      .catch(() => undefined);
});
afterAll(() => stopAllRedisServers());

const LIMIT = 100;
const WORKERS = 4;
const SENTINEL_PASSWORD = 'sentinel-s3cret';

it('fails over under traffic: UNAVAILABLE meanwhile, then decisions on the promoted replica', async () => {
  const primary = await RedisServer.start();
  const replica = await RedisServer.start({ replicaOf: primary });
  const sentinels = await Promise.all(
    [0, 1, 2].map(() =>
      RedisServer.start({
        sentinel: {
          name: 'sluice',
          primary,
          quorum: 2,
          downAfterMs: 400,
          failoverTimeoutMs: 2_000,
          password: SENTINEL_PASSWORD,
        },
      }),
    ),
  );
  cleanups.push(() => stopAllRedisServers());
  // A failover needs each Sentinel to know the replica and a majority of its peers
  // (learnt from the primary's INFO and the peers' hello messages, every 2 s).
  for (const s of sentinels) {
    const admin = s.client({ password: SENTINEL_PASSWORD });
    await waitFor(
      async (report) => {
        const replicas = (await admin.call('SENTINEL', 'REPLICAS', 'sluice')) as unknown[];
        const peers = (await admin.call('SENTINEL', 'SENTINELS', 'sluice')) as unknown[];
        report(`replicas ${replicas.length}, peers ${peers.length}`);
        return replicas.length >= 1 && peers.length >= 2 ? true : undefined;
      },
      { what: `Sentinel ${s.port} to know the replica and its peers`, timeoutMs: 15_000 },
    );
  }

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-sentinel-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  // An hour's window, so the test never crosses into a fresh one.
  fs.writeFileSync(
    path.join(dir, 'config.yaml'),
    `domain: svc\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: hour\n      requests_per_unit: ${LIMIT}\n`,
  );
  const settings = readServiceSettings({
    REDIS_TYPE: 'sentinel',
    REDIS_URL: `sluice,${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}`,
    REDIS_SENTINEL_AUTH: SENTINEL_PASSWORD,
  });
  if (settings.redis?.type !== 'sentinel') throw new Error('expected a sentinel target');
  const svc = await startService({
    envoyConfig: dir,
    redis: settings.redis,
    host: '127.0.0.1',
    grpcHost: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    logger: pino({ level: 'silent' }),
  });
  cleanups.push(() => svc.shutdown());
  const clients = connect(svc.grpcPort);
  cleanups.push(() => clients.close());

  interface Answer {
    readonly start: number;
    readonly end: number;
    readonly code: string;
  }
  const answers: Answer[] = [];
  let stop = false;
  const ask = (): Promise<string> =>
    call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', {
      domain: 'svc',
      descriptors: [{ entries: [{ key: 'tenant', value: 'a' }] }],
    }).then(
      (r) => r.overallCode,
      (e: grpc.ServiceError) => grpc.status[e.code] ?? String(e.code),
    );
  const workers = Array.from({ length: WORKERS }, async () => {
    while (!stop) {
      const start = performance.now();
      const code = await ask();
      answers.push({ start, end: performance.now(), code });
      await sleep(5);
    }
  });
  const count = (code: string, from = 0): number =>
    answers.filter((a) => a.start >= from && a.code === code).length;
  await waitFor(() => (count('OK') >= 40 ? true : undefined), {
    what: '40 admissions before the failover',
    timeoutMs: 10_000,
    intervalMs: 5,
  });
  await primary.kill();
  const killedAt = performance.now();
  const backAt = await waitFor(
    () => answers.find((a) => a.start >= killedAt && a.code === 'OK')?.end,
    { what: 'an admission after the failover', timeoutMs: 20_000, intervalMs: 10 },
  );
  await waitFor(() => (count('OVER_LIMIT') >= 10 ? true : undefined), {
    what: 'the limit to be reached on the promoted replica',
    timeoutMs: 10_000,
    intervalMs: 5,
  });
  stop = true;
  await Promise.all(workers);

  const admitted = count('OK');
  const during = answers.filter((a) => a.start >= killedAt && a.end < backAt);
  const codes = [...new Set(answers.map((a) => a.code))].sort();
  const role = (await replica.info('replication')).get('role');
  console.log(
    `[sentinel] primary killed: unavailable for ${Math.round(backAt - killedAt)}ms (kill → first admission ` +
      `after the failover, down-after-milliseconds 400), ${count('UNAVAILABLE')} UNAVAILABLE answers meanwhile; ` +
      `admitted ${admitted} against a limit of ${LIMIT} (overshoot ${Math.max(0, admitted - LIMIT)}, ` +
      `under-use ${Math.max(0, LIMIT - admitted)}); answers: ${codes.join(', ')}; former replica now ${String(role)}`,
  );
  expect(role).toBe('master');
  expect(count('UNAVAILABLE')).toBeGreaterThan(0);
  // Meanwhile only the failure mode answered: never an admission or a denial.
  for (const a of during) expect(a.code).toBe('UNAVAILABLE');
  expect(codes.every((c) => ['OK', 'OVER_LIMIT', 'UNAVAILABLE'].includes(c))).toBe(true);
  // In steady state on loopback the replica has every write but the last turn's, one
  // per worker; a consume applied whose reply was lost is under-use.
  expect(admitted).toBeLessThanOrEqual(LIMIT + WORKERS);
  expect(admitted).toBeGreaterThanOrEqual(LIMIT - count('UNAVAILABLE'));
});
