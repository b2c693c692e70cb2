/**
 * `sluice controller` as an operator runs it (dist/, spawned): with its Redis down at start
 * it opens its ports, is alive but not ready, says "waiting for Redis: <reason>" in JSON
 * log lines without a stack; once redis-server starts on that port it leads, is ready, and
 * `/metrics` shows its term, leadership and budgets. A second controller follows: ready,
 * not leader. Every process is stopped by its PID.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';
import { controllerProcess, type JsonProcess } from './fixtures/json-process.js';

const started: JsonProcess[] = [];
const servers: RedisServer[] = [];
afterAll(async () => {
  for (const p of started) p.kill('SIGKILL');
  await Promise.all(started.map((p) => p.ended()));
  for (const r of servers) await r.stop();
});

function controller(id: string, redisUrl: string): JsonProcess {
  const p = controllerProcess(id, [
    ...['--redis', redisUrl, '--domain', 'ops', '--budget', 'name=api@100'],
    ...['--port', '0', '--refresh-ms', '1000'],
  ]);
  started.push(p);
  return p;
}

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, body: await r.text() };
}

/** A sample's value in a Prometheus text exposition, by its series text. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('sluice controller operations', () => {
  it('Redis down at start: ports open, alive, not ready, "waiting for Redis" in JSON lines; leads and is ready once Redis is there', async () => {
    const redis = await RedisServer.start();
    servers.push(redis);
    await redis.kill(); // its port is known, and nothing listens there now
    const startedAtMs = Date.now();
    const c1 = controller('c1', redis.url);
    const listening = await c1.waitFor((l) => l['event'] === 'listening', 60_000);
    const http = listening['httpPort'] as number;
    expect(await get(http, '/healthcheck')).toEqual({ status: 200, body: 'OK' });
    const notReady = await get(http, '/ready');
    expect(notReady.status).toBe(503);
    expect(JSON.parse(notReady.body)).toMatchObject({ ready: false, connected: false });
    const waiting = await c1.waitFor(
      (l) => typeof l['msg'] === 'string' && l['msg'].startsWith('waiting for Redis: '),
      60_000,
    );
    expect(waiting['msg']).toContain('ECONNREFUSED');
    expect(waiting['level']).toBe(40); // warn
    const before = await get(http, '/metrics');
    expect(sample(before.body, 'sluice_controller_redis_connected')).toBe(0);
    expect(sample(before.body, 'sluice_controller_leader')).toBe(0);

    await redis.restart();
    const leader = await c1.waitFor((l) => l['event'] === 'leader', 60_000);
    // Terms are seeded from the leader's clock (docs/quota-leases.md, fencing across Redis loss).
    expect(leader['token']).toBeGreaterThanOrEqual(startedAtMs);
    await waitFor(async () => ((await get(http, '/ready')).status === 200 ? true : undefined), {
      what: 'c1 ready',
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    const after = (await get(http, '/metrics')).body;
    expect(sample(after, 'sluice_controller_redis_connected')).toBe(1);
    expect(sample(after, 'sluice_controller_leader')).toBe(1);
    expect(sample(after, 'sluice_controller_term')).toBe(leader['token']);
    expect(sample(after, 'sluice_controller_budget_units_per_second{bucket="name=api"}')).toBe(100);
    expect(sample(after, 'sluice_controller_committed_units_per_second{bucket="name=api"}')).toBe(
      0,
    );
    expect(sample(after, 'sluice_controller_agents{state="streaming"}')).toBe(0);

    // A second controller on the same Redis follows the known leader: ready, not leader.
    const c2 = controller('c2', redis.url);
    const http2 = (await c2.waitFor((l) => l['event'] === 'listening', 60_000))[
      'httpPort'
    ] as number;
    await waitFor(async () => ((await get(http2, '/ready')).status === 200 ? true : undefined), {
      what: 'c2 ready as a follower',
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    const ready2 = JSON.parse((await get(http2, '/ready')).body) as Record<string, unknown>;
    expect(ready2).toMatchObject({
      ready: true,
      leading: false,
      leader: `${String(leader['token'])}:c1`,
      term: leader['token'],
    });
    expect(sample((await get(http2, '/metrics')).body, 'sluice_controller_leader')).toBe(0);

    // Every line was JSON with a level and a message; nothing carried a stack.
    for (const l of [...c1.lines, ...c2.lines]) {
      expect(typeof l['level']).toBe('number');
      expect(JSON.stringify(l)).not.toMatch(/\\n\s+at /);
    }
    expect(c1.stderr).toBe('');
  }, 300_000);
});
