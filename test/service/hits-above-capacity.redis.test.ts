/**
 * A `hits_addend` above a rule's capacity through real gRPC, on the service's real
 * RedisStore (the Lua scripts decide): OVER_LIMIT, as envoyproxy/ratelimit answers one
 * above its limit (src/limiter/base_limiter.go), nothing charged, and a
 * `duration_until_reset` that says when the bucket is full again, never 0 while it is not.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startLoopbackService } from '../support/loopback-service.js';
import { RedisServer } from '../support/redis-server.js';
import { call, connect, type Clients } from './grpc/client.js';

interface Answer {
  overallCode: string;
  statuses: {
    code: string;
    limitRemaining: number;
    durationUntilReset: { seconds: string | number; nanos: number } | null;
  }[];
}

let redis: RedisServer;
let svc: RunningService;
let clients: Clients;
let dir: string;

beforeAll(async () => {
  redis = await RedisServer.start();
  dir = mkdtempSync(join(tmpdir(), 'sluice-hits-'));
  const file = join(dir, 'bursts.yaml');
  // 10 per minute, burst 10: one unit refills every 6 s.
  const rule = (key: string, algorithm: string) =>
    [
      `  - key: ${key}`,
      '    rate_limit: { unit: minute, requests_per_unit: 10 }',
      `    sluice: { algorithm: ${algorithm} }`,
    ].join('\n');
  writeFileSync(
    file,
    `domain: bursts\ndescriptors:\n${rule('tb', 'token-bucket')}\n${rule('gcra', 'gcra')}\n${rule('leaky', 'leaky-bucket')}\n`,
  );
  // Exactness, not latency, is under test: a slow answer on a loaded machine is still one.
  svc = await startLoopbackService({
    envoyConfig: file,
    redis: { type: 'single', url: redis.url },
    storeTimeoutMs: 5_000,
  });
  clients = connect(svc.grpcPort);
});
afterAll(async () => {
  clients?.close();
  await svc?.shutdown();
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function ask(key: string, value: string, hits: number): Promise<Answer> {
  return call<Answer>(clients.rls, 'ShouldRateLimit', {
    domain: 'bursts',
    descriptors: [{ entries: [{ key, value }] }],
    hitsAddend: hits,
  });
}

const seconds = (a: Answer): number => {
  const d = a.statuses[0]!.durationUntilReset;
  return d === null ? 0 : Number(d.seconds) + d.nanos / 1e9;
};

describe('hits_addend above the capacity (burst 10, 10 per minute)', () => {
  for (const key of ['tb', 'gcra', 'leaky']) {
    it(`${key}: OVER_LIMIT, nothing charged, reset when the bucket is full again`, async () => {
      // 4 taken: full again after 4 units refill (leak), 24 s (the Redis server's clock
      // runs on between calls: a few seconds of slack for a loaded machine).
      const took = await ask(key, 'partly-used', 4);
      expect([took.overallCode, took.statuses[0]!.limitRemaining]).toEqual(['OK', 6]);
      expect(seconds(took)).toBeGreaterThan(20);
      expect(seconds(took)).toBeLessThanOrEqual(24);

      const big = await ask(key, 'partly-used', 11);
      expect([big.overallCode, big.statuses[0]!.code, big.statuses[0]!.limitRemaining]).toEqual([
        'OVER_LIMIT',
        'OVER_LIMIT',
        0,
      ]);
      expect(seconds(big)).toBeGreaterThan(20);
      expect(seconds(big)).toBeLessThanOrEqual(24);

      // Nothing was charged: the 6 left are still there.
      const after = await ask(key, 'partly-used', 6);
      expect([after.overallCode, after.statuses[0]!.limitRemaining]).toEqual(['OK', 0]);
    });
  }

  it('a full bucket: OVER_LIMIT with reset 0 (it is full now; no wait makes 11 fit)', async () => {
    const big = await ask('tb', 'untouched', 11);
    expect([big.overallCode, big.statuses[0]!.limitRemaining, seconds(big)]).toEqual([
      'OVER_LIMIT',
      0,
      0,
    ]);
  });
});
