/**
 * examples/payments-api: its app factory under a ManualClock (exact values), and the
 * one-command server itself, spawned with the memory store and with REDIS_URL pointing
 * at a real redis-server. Imports the example as users run it (`sluice` by name: the
 * built package, which `npm test`'s pretest builds).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createPaymentsApp } from '../../examples/payments-api/app.js';
import { ManualClock } from '../../src/core/clock.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';
import { listen, type Listening } from '../support/listen.js';

const root = join(import.meta.dirname, '../..');
const acme = { 'x-api-key': 'demo-key-acme' };
const running: Listening[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
});
afterAll(() => stopAllRedisServers());

describe('examples/payments-api app', () => {
  it('charges 5 per transfer and 1 per status lookup in one bucket per tenant, 401 before the limiter', async () => {
    const { app, limits } = createPaymentsApp({
      store: new MemoryStore(),
      clock: new ManualClock(1_700_000_000_000),
    });
    const s = await listen(createServer(app));
    running.push(s);
    const got = [];
    for (const [method, path] of [
      ['GET', '/transfers/1/status'],
      ['POST', '/transfers/1'],
      ['POST', '/transfers/2'],
      ['POST', '/transfers/3'],
      ['GET', '/transfers/2/status'],
      ['GET', '/transfers/3/status'],
      ['GET', '/transfers/4/status'],
      ['GET', '/transfers/5/status'],
      ['POST', '/transfers/4'],
    ] as const) {
      const res = await fetch(`${s.url}${path}`, { method, headers: acme });
      got.push([res.status, res.headers.get('ratelimit')]);
    }
    expect(got).toEqual([
      [200, '"payments-tenant";r=19;t=1'],
      [202, '"payments-tenant";r=14;t=1'],
      [202, '"payments-tenant";r=9;t=1'],
      [202, '"payments-tenant";r=4;t=1'],
      [200, '"payments-tenant";r=3;t=1'],
      [200, '"payments-tenant";r=2;t=1'],
      [200, '"payments-tenant";r=1;t=1'],
      [200, '"payments-tenant";r=0;t=1'],
      [429, '"payments-tenant";r=0;t=1'], // 5 units at 100/s: 50ms → Retry-After 1
    ]);
    const other = await fetch(`${s.url}/transfers/1`, {
      method: 'POST',
      headers: { 'x-api-key': 'demo-key-globex' },
    });
    expect(other.headers.get('ratelimit')).toBe('"payments-tenant";r=15;t=1');
    const anonymous = await fetch(`${s.url}/transfers/1`, { method: 'POST' });
    expect([anonymous.status, await anonymous.text()]).toEqual([
      401,
      '{"error":"unknown api key"}',
    ]);
    expect(limits.stats()).toMatchObject({ allowed: 9, denied: 1, skipped: 0 });
  });
});

/** Runs the one documented command and resolves with the URL it prints. */
async function startServer(env: Record<string, string>): Promise<string> {
  const child = spawn(join(root, 'node_modules/.bin/tsx'), ['examples/payments-api/server.ts'], {
    cwd: root,
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
      return /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
    },
    {
      timeoutMs: 60_000,
      what: 'payments-api to listen',
      fatal: (e) => e instanceof Error && e.message.startsWith('server exited'),
    },
  );
}

describe('examples/payments-api server (one command)', () => {
  for (const store of ['memory', 'redis'] as const) {
    it(`serves with the ${store} store`, async () => {
      const env: Record<string, string> = {};
      if (store === 'redis') env['REDIS_URL'] = (await RedisServer.start()).url;
      const url = await startServer(env);
      const started = performance.now();
      const first = await fetch(`${url}/transfers/1`, { method: 'POST', headers: acme });
      expect([
        first.status,
        first.headers.get('ratelimit-policy'),
        first.headers.get('ratelimit'),
      ]).toEqual([
        202,
        '"payments-tenant";q=100;w=1;sluice-burst=20',
        '"payments-tenant";r=15;t=1',
      ]);
      expect(await first.json()).toEqual({ transfer: '1', state: 'accepted' });
      // 30 transfers at once, 150 units: at most the 15 left plus what refilled (100/s)
      // while they ran is admitted, whatever the machine's load; the rest are 429s.
      const statuses = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          fetch(`${url}/transfers/${i}`, { method: 'POST', headers: acme }).then((r) => r.status),
        ),
      );
      const elapsedS = (performance.now() - started) / 1000;
      const admitted = statuses.filter((s) => s === 202).length;
      // 503 is the policy's `closed` answer when Redis misses the 250ms timeout, which a
      // loaded machine can cause; never anything else.
      expect(statuses.filter((s) => s !== 202 && s !== 429 && s !== 503)).toEqual([]);
      expect(admitted * 5).toBeLessThanOrEqual(15 + 100 * elapsedS);
    }, 90_000);
  }
});
