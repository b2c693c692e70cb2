import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaController } from '../../src/quota/controller.js';
import { RlqsAgentClient } from '../../src/quota/rlqs/agent-client.js';
import { systemClock } from '../../src/core/clock.js';
import { startRlqsServer, type RlqsTestServer } from '../support/rlqs-server.js';

// Fencing over the wire: two real RLQS servers on loopback, one serving under token 2
// (the leader) and one still serving under token 1 (a deposed leader that has not noticed
// yet). A Sluice agent that has seen token 2 says so when it opens a stream: the deposed
// server refuses the stream (and would take a higher term), so no assignment of token 1
// ever reaches the agent, and the lease it holds stays.
const servers: grpc.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.tryShutdown(() => r()))));
});

const serverEvents: Record<string, unknown>[] = [];
let notify = () => {};

async function serve(token: number): Promise<RlqsTestServer> {
  const controller = new QuotaController(
    { budgets: [{ bucket: 'name=api', ratePerSecond: 100 }] },
    token,
  );
  const started = await startRlqsServer(controller, {
    domain: 'd',
    clock: systemClock,
    log: (e) => {
      serverEvents.push({ ...e, server: token });
      notify();
    },
  });
  servers.push(started.server);
  return started;
}

describe('RlqsAgentClient fencing', () => {
  it('refuses a deposed leader’s assignments once it has seen the new leader’s token', async () => {
    const leader = await serve(2);
    const deposed = await serve(1);
    const events: Record<string, unknown>[] = [];
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
    const until = (
      match: (e: Record<string, unknown>) => boolean,
      from: readonly Record<string, unknown>[] = events,
    ) =>
      new Promise<void>((resolve) => {
        notify = () => from.some(match) && resolve();
        notify();
      });
    client.start();
    await until((e) => e['event'] === 'lease' && e['outcome'] === 'applied' && e['token'] === 2);
    const held = client.agent.lease(systemClock.nowMs());
    // The leader's server goes away; the agent moves on to the deposed one.
    leader.server.forceShutdown();
    await until(
      (e) => e['event'] === 'higher_term_seen' && e['server'] === 1 && e['seen'] === 2,
      serverEvents,
    );
    client.close();
    const fromDeposed = events.filter((e) => e['event'] === 'lease' && e['token'] === 1);
    expect(fromDeposed.every((e) => e['outcome'] === 'stale-leader')).toBe(true);
    expect(fromDeposed.some((e) => e['outcome'] === 'applied')).toBe(false);
    expect(client.agent.lease(systemClock.nowMs())).toBe(held);
  });
});
