import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { QuotaController } from '../../src/quota/controller.js';
import type { Lease, UsageReport } from '../../src/quota/lease.js';
import { RlqsAgentClient } from '../../src/quota/rlqs/agent-client.js';
import { startRlqsServer } from '../support/rlqs-server.js';

// RlqsAgentClient against a real RLQS server on loopback (the controller core behind it,
// lease TTL 3 s): how long it holds a lease, and what it sends when it leaves.
const servers: grpc.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.tryShutdown(() => r()))));
});

/** The real controller core, keeping the reports it takes. */
class RecordingController extends QuotaController {
  readonly reports: UsageReport[] = [];
  override report(r: UsageReport, nowMs: number): Lease | undefined {
    this.reports.push(r);
    return super.report(r, nowMs);
  }
}

async function serve(): Promise<{ port: number; controller: RecordingController }> {
  const controller = new RecordingController(
    { budgets: [{ bucket: 'name=api', ratePerSecond: 100 }], leaseTtlMs: 3_000 },
    1,
  );
  const { port, server } = await startRlqsServer(controller, { domain: 'd', clock: systemClock });
  servers.push(server);
  return { port, controller };
}

function client(port: number, maxTtlMs?: number, agent = 'a') {
  let applied: () => void = () => {};
  const firstLease = new Promise<void>((resolve) => (applied = resolve));
  const c = new RlqsAgentClient({
    controllers: [`127.0.0.1:${port}`],
    agent,
    domain: 'd',
    bucket: { name: 'api' },
    fallback: { kind: 'deny' },
    // Long enough that no periodic report comes between the first lease and close().
    refreshMs: 60_000,
    ...(maxTtlMs === undefined ? {} : { maxTtlMs }),
    log: (e) => {
      if (e['event'] === 'lease' && e['outcome'] === 'applied') applied();
    },
  });
  c.start();
  return { c, firstLease };
}

describe('RlqsAgentClient', () => {
  it("holds a lease for the assignment's TTL, or for maxTtlMs when that is shorter", async () => {
    const { port } = await serve();
    const plain = client(port);
    // Another name: a controller refuses a second live stream under one name.
    const capped = client(port, 1_500, 'b');
    await Promise.all([plain.firstLease, capped.firstLease]);
    const nowMs = systemClock.nowMs();
    expect(plain.c.agent.lease(nowMs)?.ttlMs).toBe(3_000);
    expect(capped.c.agent.lease(nowMs)?.ttlMs).toBe(1_500);
    expect(capped.c.agent.expiresAtMs - nowMs).toBeLessThanOrEqual(1_500);
    expect(capped.c.connectedTo).toBe(`127.0.0.1:${port}`);
    await Promise.all([plain.c.close(), capped.c.close()]);
    expect(capped.c.connectedTo).toBeUndefined();
  });

  it('close() sends the usage since the last report before it leaves', async () => {
    const { port, controller } = await serve();
    const { c, firstLease } = client(port);
    await firstLease;
    expect(controller.reports.map((r) => r.allowed)).toEqual([0]); // the subscribing report
    let allowed = 0;
    for (let i = 0; i < 7; i++) if (c.take(1) === 'allowed') allowed++;
    expect(allowed).toBe(7);
    // close() resolves once the controller has ended the stream: the report is in.
    await c.close();
    expect(controller.reports.map((r) => r.allowed)).toEqual([0, 7]);
  });

  it('close() gives its leases back: they count until the end of the window it left in, not until their deadline', async () => {
    const { port, controller } = await serve();
    const { c, firstLease } = client(port);
    await firstLease;
    const leftAt = systemClock.nowMs();
    await c.close();
    // Window R = 1 s and margin δ = 0.5 s (the defaults for R = 1 s); the lease's own
    // deadline is its issue + TTL (3 s) + δ, 3.5 s after it was sent.
    const share = controller.committed('name=api', leftAt);
    expect(share).toBeGreaterThan(0);
    expect(controller.committed('name=api', leftAt + 1_400)).toBe(share);
    expect(controller.committed('name=api', systemClock.nowMs() + 1_500)).toBe(0);
    expect(controller.record('name=api', 'a')?.abandoned).toBe(true);
    expect(c.take(1)).toBe('denied');
  });
});
