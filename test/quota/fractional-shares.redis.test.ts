import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startQuotaController,
  type QuotaControllerProcess,
} from '../../src/quota/controller-process.js';
import { pacedSharesBound } from '../../src/quota/bounds.js';
import { RlqsAgentClient } from '../../src/quota/rlqs/agent-client.js';
import { RedisServer } from '../support/redis-server.js';
import { waitFor } from '../support/wait.js';

// A budget of 2/s over three agents that all want more: each share is about 0.66/s. A
// share under 1/s is sent as a token bucket with a longer fill interval (3 per 5 s here,
// see tokenFill), never DENY_ALL, and the agents enforce it as 3 units per 5 s window.
// Real controller (gRPC server, leader election on a real redis-server), real agents on
// the RLQS stream.
const BUDGET = 2;
const R = 1_000;
// The instant the agents' last decision was made at, read by their clock: a unit is
// counted in the window of R the agent counted it in.
let decidedAtMs = 0;
const clock = { nowMs: () => (decidedAtMs = Date.now()) };
let redis: RedisServer;
let controller: QuotaControllerProcess;
const agents: RlqsAgentClient[] = [];
beforeAll(async () => {
  redis = await RedisServer.start();
  controller = await startQuotaController({
    redisUrl: redis.url,
    id: 'fractional',
    domain: 'd',
    port: 0,
    budgets: [{ bucket: 'name=api', ratePerSecond: BUDGET }],
    refreshMs: 1_000,
  });
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.close()));
  await controller.close();
  await redis.stop();
});

describe('fractional shares', () => {
  it('a 2/s budget over three agents admits close to 2/s and never more', async () => {
    for (const name of ['a', 'b', 'c']) {
      const a = new RlqsAgentClient({
        controllers: [`127.0.0.1:${controller.port}`],
        agent: name,
        domain: 'd',
        bucket: { name: 'api' },
        fallback: { kind: 'deny' },
        refreshMs: 1_000,
        clock,
      });
      agents.push(a);
      a.start();
    }
    // Each agent wants 50/s; admitted units are counted per aligned window of 5 s, the
    // fill interval of a 0.66/s share, so that every window holds whole fills.
    const W = 5_000;
    const admitted = new Map<number, number>();
    // And per window of R, where integer units make some excess inherent (three agents
    // at 0.6/s, each paced at ⌈0.6 × 1⌉ = 1 per R): at most the bound `sluice explain`
    // prints as `paced shares`.
    const admittedPerR = new Map<number, number>();
    const demand = setInterval(() => {
      for (const a of agents) {
        if (a.take() === 'allowed') {
          const w = Math.floor(Date.now() / W);
          admitted.set(w, (admitted.get(w) ?? 0) + 1);
          const r = Math.floor(decidedAtMs / R);
          admittedPerR.set(r, (admittedPerR.get(r) ?? 0) + 1);
        }
      }
    }, 20);
    try {
      // Settled once the three agents, of equal demand, hold one share under 1/s. Under
      // 1/s alone is not enough: the first rounds, before every agent's demand is known,
      // give unequal shares (0.6, 0.5, 0.43/s: fills of 5, 2 and 7 s), and the window a
      // share changes in counts what the old, longer window admitted.
      await waitFor(
        () => {
          const rates = agents.map((a) => a.agent.lease(Date.now())?.rate ?? 1);
          return rates.every((r) => r < 1 && Math.abs(r - rates[0]!) < 1e-9) ? true : undefined;
        },
        { what: 'one share under 1/s on all three agents', timeoutMs: 20_000 },
      );
      const first = Math.floor(Date.now() / W) + 1;
      const windows = 3;
      await waitFor(() => (Math.floor(Date.now() / W) >= first + windows ? true : undefined), {
        what: `${windows} whole windows of ${W} ms`,
        timeoutMs: (windows + 2) * W,
        intervalMs: 200,
      });
      const counts = Array.from({ length: windows }, (_, i) => admitted.get(first + i) ?? 0);
      const perWindow = (BUDGET * W) / 1000;
      for (const c of counts) expect(c).toBeLessThanOrEqual(perWindow);
      const utilization = counts.reduce((s, c) => s + c, 0) / (perWindow * windows);
      // Each share is 0.663/s, sent as 3 per 5 s (0.6/s): 9 of 10 units per window.
      expect(utilization, `admitted per ${W} ms: ${counts.join(', ')}`).toBeGreaterThanOrEqual(
        0.85,
      );
      console.log(
        `fractional shares: admitted ${counts.join(', ')} per 5 s (budget 10), utilization ${(utilization * 100).toFixed(0)}%`,
      );
      const perR = Array.from(
        { length: (windows * W) / R },
        (_, i) => admittedPerR.get((first * W) / R + i) ?? 0,
      );
      const bound = pacedSharesBound({ budgetPerSecond: BUDGET, refreshMs: R, agents: 3 });
      console.log(
        `fractional shares: admitted ${perR.join(', ')} per window of R (C·R = ${(BUDGET * R) / 1000}, paced-shares bound ${bound})`,
      );
      for (const c of perR)
        expect(c, `admitted per ${R} ms: ${perR.join(', ')}`).toBeLessThanOrEqual(bound);
    } finally {
      clearInterval(demand);
    }
  }, 60_000);
});
