/**
 * The service's structured logs as an operator reads them: the JSON lines on the standard
 * output of a real `sluice serve` (the built CLI) on a real redis-server. One line per
 * config load (ok, then a rejected reload, then ok again), one per store state change
 * (unhealthy when Redis is stopped, healthy once it is back), and sampled decision lines
 * (`SLUICE_LOG_SAMPLE_RATE=1`: every one) with the identity hashed and the request id.
 */
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityHash } from '../../src/stores/identity-hash.js';
import { RedisServer } from '../support/redis-server.js';
import { spawnServe, stopServe, type Serve } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';

const FIXTURE = join(import.meta.dirname, 'fixtures/status/policies.yaml');
const TENANT = 'tenant-raw-identity-5519';

type Line = Record<string, unknown> & { msg: string };

let dir: string;
let policies: string;
let redis: RedisServer;
let serve: Serve;

/** Every complete JSON line the service has written to stdout so far. */
function lines(): Line[] {
  const text = serve.stdout.join('');
  return text
    .slice(0, text.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);
}

const withMsg = (prefix: string): Line[] => lines().filter((l) => l.msg.startsWith(prefix));

async function until(prefix: string, count: number): Promise<Line[]> {
  return waitFor(() => (withMsg(prefix).length >= count ? withMsg(prefix) : undefined), {
    what: `${count} "${prefix}" line(s) on stdout`,
    timeoutMs: 10_000,
    intervalMs: 20,
  });
}

async function check(tenant: string, headers: Record<string, string> = {}, requestId?: string) {
  const r = await fetch(`http://127.0.0.1:${serve.httpPort}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'route', value: 'POST /exports' },
      ],
      ...(requestId === undefined ? {} : { requestId }),
    }),
  });
  await r.arrayBuffer();
  return r.status;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-logs-'));
  policies = join(dir, 'policies.yaml');
  await copyFile(FIXTURE, policies);
  redis = await RedisServer.start();
  serve = await spawnServe(['--policies', policies, '--redis', redis.url], {
    SLUICE_LOG_SAMPLE_RATE: '1',
    STORE_TIMEOUT_MS: '200',
  });
});

afterAll(async () => {
  if (serve !== undefined) await stopServe(serve);
  await redis?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('sluice serve logs (stdout, JSON lines)', () => {
  it('logs each config load with its files and policies, ok or failed with the message', async () => {
    const [loaded] = await until('config loaded', 1);
    expect(loaded).toMatchObject({ result: 'ok', files: [policies] });
    expect(loaded!['policies']).toEqual(['payments-tenant', 'exports-shadow']);

    await writeFile(policies, 'policies:\n  - name: broken\n    match: [tenant]\n    rate: -1\n');
    const [rejected] = await until('config reload rejected', 1);
    expect(rejected).toMatchObject({ result: 'failed', files: [policies], level: 50 });
    expect(rejected!['message']).toContain('policies[0].rate');

    await copyFile(FIXTURE, policies);
    const [reloaded] = await until('config reloaded', 1);
    expect(reloaded).toMatchObject({ result: 'ok', files: [policies] });
  });

  it('logs sampled decisions with the identity hashed and the request id, never the identity', async () => {
    expect(await check(TENANT, { 'x-request-id': 'hdr-req-1' })).toBe(200);
    expect(await check(TENANT, {}, 'body-req-2')).toBe(200);
    // Each check decides two policies: payments-tenant and exports-shadow.
    const decisions = await until('decision', 4);
    expect(decisions.map((d) => [d['policy'], d['path'], d['allowed'], d['requestId']])).toEqual([
      ['payments-tenant', 'store', true, 'hdr-req-1'],
      ['exports-shadow', 'shadow', true, 'hdr-req-1'],
      ['payments-tenant', 'store', true, 'body-req-2'],
      ['exports-shadow', 'shadow', false, 'body-req-2'], // would deny: burst 1
    ]);
    for (const d of decisions) expect(d['identity']).toBe(identityHash(TENANT));
    expect(serve.stdout.join('')).not.toContain(TENANT);
  });

  it('logs each store state change once: unhealthy when Redis stops, healthy when it is back', async () => {
    await redis.stop({ keepClients: true });
    expect(await check('tenant-during-outage')).toBe(503); // payments-tenant fails closed
    const [down] = await until('store failing', 1);
    expect(down).toMatchObject({ state: 'unhealthy', level: 50 });
    await redis.restart();
    let n = 0;
    await waitFor(async () => ((await check(`tenant-after-${n++}`)) === 200 ? true : undefined), {
      what: 'a check answered by Redis again',
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    const [up] = await until('store healthy again', 1);
    expect(up).toMatchObject({ state: 'healthy', level: 30 });
    expect(withMsg('store failing')).toHaveLength(1);
  });
});
