import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaController } from '../../src/quota/controller.js';
import { RlqsAgentClient } from '../../src/quota/rlqs/agent-client.js';
import { systemClock } from '../../src/core/clock.js';
import { startRlqsServer, type RlqsTestServer } from '../support/rlqs-server.js';

// Fencing over the wire: two real RLQS servers on loopback, one serving under token 2
// (the leader) and one still serving under token 1 (a deposed leader that has not noticed
// yet). A Sluice agent that has seen token 2 refuses every assignment of token 1.
const servers: grpc.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.tryShutdown(() => r()))));
});

async function serve(token: number): Promise<RlqsTestServer> {
  const controller = new QuotaController(
    { budgets: [{ bucket: 'name=api', ratePerSecond: 100 }] },
    token,
  );
  const started = await startRlqsServer(controller, { domain: 'd', clock: systemClock });
  servers.push(started.server);
  return started;
}

describe('RlqsAgentClient fencing', () => {
  it('refuses a deposed leader’s assignments once it has seen the new leader’s token', async () => {
    const leader = await serve(2);
    const deposed = await serve(1);
    const events: Record<string, unknown>[] = [];
    let notify = () => {};
    const client = new RlqsAgentClient({
      controllers: [`127.0.0.1:${leader.port}`, `127.0.0.1:${deposed.port}`],
      agent: 'a',
      domain: 'd',
      bucket: { name: 'api' },
      fallback: { kind: 'deny' },
      reconnectMs: 20,
      log: (e) => {
        events.push(e);
        notify();
      },
    });
    const until = (match: (e: Record<string, unknown>) => boolean) =>
      new Promise<void>((resolve) => {
        notify = () => events.some(match) && resolve();
        notify();
      });
    client.start();
    await until((e) => e['event'] === 'lease' && e['outcome'] === 'applied' && e['token'] === 2);
    const held = client.agent.lease(systemClock.nowMs());
    // The leader's server goes away; the agent moves on to the deposed one.
    leader.server.forceShutdown();
    await until((e) => e['event'] === 'lease' && e['token'] === 1);
    client.close();
    const fromDeposed = events.filter((e) => e['event'] === 'lease' && e['token'] === 1);
    expect(fromDeposed.length).toBeGreaterThan(0);
    expect(fromDeposed.every((e) => e['outcome'] === 'stale-leader')).toBe(true);
    expect(client.agent.refused).toBe(fromDeposed.length);
    expect(client.agent.lease(systemClock.nowMs())).toBe(held);
  });
});
