import { afterEach, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { startExampleService } from '../support/loopback-service.js';

/**
 * LOCAL_CACHE_SIZE_IN_BYTES in the service (the variable is read by env-settings; its
 * test covers the text): with bytes, a rule the store has just denied is answered in
 * process until its retry time, which the decisions metric shows as path "cache".
 */
const transfer = (tenant: string) => ({
  domain: 'payments',
  descriptors: [
    {
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'route', value: 'POST /transfers' },
      ],
    },
  ],
});

let svc: RunningService | undefined;
afterEach(async () => {
  await svc?.shutdown();
  svc = undefined;
});

async function overLimitPaths(localCacheSizeBytes: number): Promise<string> {
  svc = await startExampleService({ localCacheSizeBytes });
  const base = `http://127.0.0.1:${svc.httpPort}`;
  const statuses: number[] = [];
  // 20 per second, burst 20, a still clock: 20 admitted, then 10 over the limit.
  for (let i = 0; i < 30; i++) {
    const r = await fetch(`${base}/json`, { method: 'POST', body: JSON.stringify(transfer('t')) });
    statuses.push(r.status);
  }
  expect(statuses.filter((s) => s === 429)).toHaveLength(10);
  const metrics = await (await fetch(`${base}/metrics`)).text();
  return metrics
    .split('\n')
    .filter((l) => l.startsWith('sluice_decisions_total{') && l.includes('OVER_LIMIT'))
    .join('\n');
}

describe('LOCAL_CACHE_SIZE_IN_BYTES', () => {
  it('with bytes: after the store denies, the rest are denied by the over-limit cache', async () => {
    const lines = await overLimitPaths(4_096);
    expect(lines).toMatch(/path="store"[^\n]* 1$/m);
    expect(lines).toMatch(/path="cache"[^\n]* 9$/m);
  });

  it('with 0 (the default): every denial is the store’s', async () => {
    const lines = await overLimitPaths(0);
    expect(lines).toMatch(/path="store"[^\n]* 10$/m);
    expect(lines).not.toContain('path="cache"');
  });
});
