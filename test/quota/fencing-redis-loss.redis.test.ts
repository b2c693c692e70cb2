import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/core/clock.js';
import {
  startQuotaController,
  type QuotaControllerProcess,
} from '../../src/quota/controller-process.js';
import { RlqsAgentClient } from '../../src/quota/rlqs/agent-client.js';
import { freePort } from '../support/free-port.js';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';

// The fencing term must never go back, even when the controllers' Redis loses the stored
// token (FLUSHALL here; a restart without persistence, a failover to a replica without
// the key or a changed --prefix lose it the same way). Real controllers (gRPC server,
// election on a real redis-server) and a real agent on the RLQS stream.
const R = 500;
const L = 1_500;
let redis: RedisServer;
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await redis.stop();
});

async function controller(
  id: string,
  port: number,
  prefix: string,
  clock?: Clock,
): Promise<QuotaControllerProcess & { log: Record<string, unknown>[] }> {
  const log: Record<string, unknown>[] = [];
  const c = await startQuotaController({
    redisUrl: redis.url,
    id,
    domain: 'd',
    port,
    prefix,
    budgets: [{ bucket: 'name=api', ratePerSecond: 100 }],
    refreshMs: R,
    leaseTtlMs: L,
    ...(clock === undefined ? {} : { clock }),
    log: (e) => log.push(e),
  });
  closers.push(() => c.close());
  return Object.assign(c, { log });
}

function agent(ports: readonly number[]) {
  const applied: { token: number; atMs: number }[] = [];
  const a = new RlqsAgentClient({
    controllers: ports.map((p) => `127.0.0.1:${p}`),
    agent: 'a',
    domain: 'd',
    bucket: { name: 'api' },
    fallback: { kind: 'deny' },
    refreshMs: R,
    reconnectMs: 50,
    log: (e) => {
      if (e['event'] === 'lease' && e['outcome'] === 'applied')
        applied.push({ token: Number(e['token']), atMs: Date.now() });
    },
  });
  closers.push(() => a.close());
  a.start();
  return { a, applied };
}

const appliedAbove = (applied: readonly { token: number; atMs: number }[], token: number) => () =>
  applied.find((x) => x.token > token);

describe('fencing across Redis loss', () => {
  it('Redis loses the token (FLUSHALL): the next term is higher, and the agent is back on leases', async () => {
    // Earlier terms happened: the counter stood at 41.
    await redis.client().set('{fence}:token', '41');
    const c = await controller('c1', 0, 'fence');
    const { applied } = agent([c.port]);
    const before = await waitFor(appliedAbove(applied, 0), { what: 'a first lease' });
    const flushedAt = Date.now();
    await redis.client().flushall();
    const after = await waitFor(appliedAbove(applied, before.token), {
      what: `a lease under a term above ${before.token}`,
      timeoutMs: 10_000,
    });
    // The agent refused nothing as stale: it only ever saw terms going up.
    const tokens = applied.map((x) => x.token);
    expect(tokens).toEqual([...tokens].sort((x, y) => x - y));
    console.log(
      `Redis emptied: term ${before.token} → ${after.token}; agent back on leases ${after.atMs - flushedAt} ms after FLUSHALL`,
    );
  }, 30_000);

  it('a new leader whose clock is an hour behind, on a Redis without the token, takes a term above the one the agent has seen', async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    const c1 = await controller('c2', p1, 'skew');
    const { applied } = agent([p1, p2]);
    const before = await waitFor(appliedAbove(applied, 0), { what: 'a first lease' });
    // Not awaited: its server shuts down only once the agent's channel closes (afterAll).
    void c1.close();
    const admin = redis.client();
    await waitFor(async () => ((await admin.get('{skew}:leader')) === null ? true : undefined), {
      what: 'c2 to resign',
    });
    // Only this test's keys: the other test's controller still leads its own prefix.
    await admin.del('{skew}:token', '{skew}:state');
    const behind: Clock = { nowMs: () => Date.now() - 3_600_000 };
    const lostAt = Date.now();
    const c2 = await controller('c3', p2, 'skew', behind);
    const after = await waitFor(appliedAbove(applied, before.token), {
      what: `a lease under a term above ${before.token}`,
      timeoutMs: 10_000,
    });
    expect(c2.log.some((e) => e['event'] === 'higher_term_seen')).toBe(true);
    console.log(
      `clock 1 h behind: term ${before.token} → ${after.token}; agent back on leases ${after.atMs - lostAt} ms after the new controller started`,
    );
  }, 30_000);
});
