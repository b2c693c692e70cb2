/**
 * envoy rules go through the store's policy check, as native policies do: the real
 * service on a real redis-server refuses a sliding-log rule above the Redis store's
 * maxSlidingLogLimit (1000) at start-up, and on a reload keeps the old rules in force
 * and reports the failure.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import type { RunningService } from '../../src/service/main.js';
import { startLoopbackService } from '../support/loopback-service.js';
import { RedisServer } from '../support/redis-server.js';

let redis: RedisServer;
let dir: string;
const running: RunningService[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  dir = mkdtempSync(join(tmpdir(), 'sluice-envoy-check-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.shutdown()));
});
afterAll(async () => {
  await redis?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** One domain with a sliding-log rule of `perMinute` on `tenant`. */
function writeRules(file: string, perMinute: number): void {
  writeFileSync(
    file,
    [
      'domain: audit',
      'descriptors:',
      '  - key: tenant',
      '    rate_limit:',
      '      unit: minute',
      `      requests_per_unit: ${perMinute}`,
      '    sluice:',
      '      algorithm: sliding-log',
      '',
    ].join('\n'),
  );
}

/** The limit `/json` answers for tenant=t in domain audit. */
async function limitOf(svc: RunningService): Promise<number | undefined> {
  const r = await fetch(`http://127.0.0.1:${svc.httpPort}/json`, {
    method: 'POST',
    body: JSON.stringify({
      domain: 'audit',
      descriptors: [{ entries: [{ key: 'tenant', value: 't' }] }],
    }),
  });
  const body = (await r.json()) as { statuses: { currentLimit?: { requestsPerUnit?: number } }[] };
  return body.statuses[0]?.currentLimit?.requestsPerUnit;
}

async function configLoads(svc: RunningService, result: 'success' | 'error'): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
  const m = new RegExp(`^sluice_config_load_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text);
  return Number(m?.[1] ?? 0);
}

describe('envoy rules and the Redis store policy check', () => {
  it('refuses a sliding-log rule above maxSlidingLogLimit at start-up, naming the rule', async () => {
    const file = join(dir, 'too-big.yaml');
    writeRules(file, 5_000);
    const started = startLoopbackService({
      envoyConfig: file,
      redis: { type: 'single', url: redis.url },
      storeTimeoutMs: 5_000,
    });
    const error = await started.then(
      (svc) => {
        running.push(svc);
        throw new Error('the service started with a rule the store cannot run');
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PolicyError);
    expect((error as PolicyError).code).toBe('SLUICE_ERR_POLICY_UNSUPPORTED');
    expect((error as PolicyError).issues).toEqual([
      {
        file,
        path: 'descriptors[0].rate_limit',
        message:
          'policy "audit.tenant": sliding-log limit 5000 is above the Redis store\'s maxSlidingLogLimit 1000; its memory and per-decision work grow with the limit, so use sliding-window-counter or token-bucket for high limits',
      },
    ]);
  });

  it('accepts one at the limit, and a reload above it keeps the old rule and reports the failure', async () => {
    const file = join(dir, 'reloaded.yaml');
    writeRules(file, 1_000);
    const svc = await startLoopbackService({
      envoyConfig: file,
      redis: { type: 'single', url: redis.url },
      storeTimeoutMs: 5_000,
    });
    running.push(svc);
    expect(await limitOf(svc)).toBe(1_000);

    writeRules(file, 5_000);
    expect(await svc.reload()).toBe(false);
    expect(await limitOf(svc)).toBe(1_000);
    expect(await configLoads(svc, 'error')).toBeGreaterThanOrEqual(1);
    expect(await configLoads(svc, 'success')).toBe(1);
    expect(svc.status.snapshot().config.lastRejected?.message).toContain(
      'policy "audit.tenant": sliding-log limit 5000 is above the Redis store\'s maxSlidingLogLimit 1000',
    );
  });
});
