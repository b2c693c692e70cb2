/**
 * The service's stage and hot-key wiring on the memory store: a batch policy's checks
 * through `/v1/check` show in the `sluice_stage_*` families, and the status page's hot
 * keys are the limiter metrics' top-k (the memory store tracks none of its own).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePolicyText } from '../../src/config/load.js';
import { identityHash } from '../../src/stores/identity-hash.js';
import { bucketKey, hashTagOf } from '../../src/stores/key.js';
import type { RunningService } from '../../src/service/main.js';
import type { StatusSnapshot } from '../../src/service/status/status-snapshot.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { sumOf } from '../support/prometheus-text.js';

const POLICIES = `
policies:
  - name: batched-api
    match: [{ key: tenant }]
    algorithm: token-bucket
    rate: 100
    period: 1s
    burst: 100
    batch: { size: 8, ttl: 1m }
`;

const [batched] = parsePolicyText(POLICIES, 'policies.yaml').policies;
let dir: string;
let svc: RunningService;

async function check(tenant: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${svc.httpPort}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ descriptor: { tenant } }),
  });
  await res.arrayBuffer();
  return res.status;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-stage-units-'));
  writeFileSync(join(dir, 'policies.yaml'), POLICIES);
  writeFileSync(join(dir, 'envoy.yaml'), 'domain: unused\ndescriptors: []\n');
  svc = await startLoopbackService({
    policiesFile: join(dir, 'policies.yaml'),
    envoyConfig: join(dir, 'envoy.yaml'),
    clock: stillClock(),
  });
});

afterAll(async () => {
  await svc?.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

describe('sluice serve on the memory store with a batch policy', () => {
  it('counts the token batch units in sluice_stage_* and its decisions under path batch', async () => {
    for (let i = 0; i < 6; i++) expect(await check('acme')).toBe(200);
    const t = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
    const units = (name: string) => sumOf(t, name, { stage: 'batch', policy: 'batched-api' });
    // Slow start reserves 1, 2, 4 units for 6 checks of one unit: 7 granted, 6 spent.
    expect(units('sluice_stage_granted_units_total')).toBe(7);
    expect(units('sluice_stage_spent_units_total')).toBe(6);
    expect(
      sumOf(t, 'sluice_decisions_total', { policy: 'batched-api', status: 'OK', path: 'batch' }),
    ).toBe(6);
  });

  it("shows the limiter metrics' hot identities on the status page, hashed as the decision log hashes them", async () => {
    for (let i = 0; i < 3; i++) await check('busy');
    const res = await fetch(`http://127.0.0.1:${svc.httpPort}/status?format=json`);
    const snapshot = (await res.json()) as StatusSnapshot;
    expect(snapshot.hotKeys.source).toMatch(/limiter/);
    // acme: 6 checks (first test), busy: 3; the memory store tracks no hot keys itself.
    expect(snapshot.hotKeys.keys).toEqual([
      {
        hash: identityHash(hashTagOf(bucketKey(batched!, [{ key: 'tenant', value: 'acme' }]))),
        count: 6,
      },
      {
        hash: identityHash(hashTagOf(bucketKey(batched!, [{ key: 'tenant', value: 'busy' }]))),
        count: 3,
      },
    ]);
    expect(snapshot.hotKeys.keys).toEqual(svc.metrics.limiter.hotIdentities());
  });
});
