/**
 * `startService` with quota leases on two rules, against a real RLQS server on loopback
 * (the controller core behind `sluice controller`): each rule's agent keeps its own
 * stream, and each rule is decided by its own lease (path `lease`, the lease's window).
 */
import * as grpc from '@grpc/grpc-js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { QuotaController } from '../../src/quota/controller.js';
import { startService, type RunningService } from '../../src/service/main.js';
import { readLeaseTlsFiles, readServiceSettings } from '../../src/service/env-settings.js';
import { captureLog } from '../support/captured-log.js';
import { startRlqsServer } from '../support/rlqs-server.js';
import { issueCert, makeCa } from '../support/test-certs.js';
import { waitFor } from '../support/wait.js';

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

async function rlqsServer(
  credentials = grpc.ServerCredentials.createInsecure(),
): Promise<{ port: number; controller: QuotaController }> {
  const controller = new QuotaController(
    {
      budgets: [
        { bucket: 'policy=alpha', ratePerSecond: 100 },
        { bucket: 'policy=beta', ratePerSecond: 40 },
      ],
    },
    1,
  );
  const { port, stop } = await startRlqsServer(controller, {
    domain: 'sluice',
    clock: systemClock,
    credentials,
  });
  cleanup.push(stop);
  return { port, controller };
}

const CONFIG = `domain: edge
descriptors:
  - key: generic_key
    value: alpha
    rate_limit: { unit: second, requests_per_unit: 100 }
    sluice: { name: alpha, algorithm: token-bucket }
  - key: generic_key
    value: beta
    rate_limit: { unit: second, requests_per_unit: 40 }
    sluice: { name: beta, algorithm: token-bucket }
`;

describe('startService with quota leases', () => {
  it('keeps one stream per leased rule, and decides each rule from its own lease', async () => {
    const { port, controller } = await rlqsServer();
    const dir = await mkdtemp(join(tmpdir(), 'sluice-lease-agents-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'config.yaml'), CONFIG);
    // debug: each applied lease is logged ('quota lease lease', with its rate).
    const log = captureLog('debug');
    const svc: RunningService = await startService({
      envoyConfig: join(dir, 'config.yaml'),
      host: '127.0.0.1',
      port: 0,
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logger: log.logger,
      leases: { controllers: [`127.0.0.1:${port}`], policies: ['alpha', 'beta'], agent: 'i1' },
    });
    cleanup.push(() => svc.shutdown());
    const rows = () => svc.status.snapshot().leases.allocations;
    await waitFor(
      () => (rows().every((r) => r.mode === 'lease' && r.controller !== null) ? true : undefined),
      { what: 'a lease for each rule', timeoutMs: 5_000, intervalMs: 20 },
    );
    expect(rows().map((r) => [r.policy, r.holder])).toEqual([
      ['alpha', 'i1/alpha'],
      ['beta', 'i1/beta'],
    ]);
    // A newcomer's first lease is half an equal share: 50/s of alpha's 100, 20/s of beta's 40.
    // Read from each rule's first applied lease, not from /status: a later round may
    // already have raised it by the time this line runs.
    const applied = (policy: string) =>
      log
        .matching('quota lease lease')
        .filter((l) => l['policy'] === policy && l['outcome'] === 'applied');
    expect([applied('alpha')[0]?.['rate'], applied('beta')[0]?.['rate']]).toEqual([50, 20]);
    const check = (value: string) =>
      svc.service.shouldRateLimit({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'generic_key', value }] }],
        hitsAddend: 1,
      });
    // Each answered from its lease: its window's allowance, less what the window used.
    // A check that straddles a new window or a new lease is tried again: the answer is
    // compared with the row of the same window and allowance.
    const row = (policy: string) => rows().find((r) => r.policy === policy)!;
    for (const policy of ['alpha', 'beta']) {
      const pinned = await waitFor(
        async () => {
          const before = row(policy);
          const answer = await check(policy);
          const after = row(policy);
          const same =
            before.units === after.units && after.usedInWindow === before.usedInWindow + 1;
          return same ? { answer, after } : undefined;
        },
        { what: `a check of ${policy} within one window`, timeoutMs: 10_000, intervalMs: 1 },
      );
      expect(pinned.answer.overallCode).toBe('OK');
      expect(pinned.after.units).toBeGreaterThan(0);
      expect(pinned.answer.statuses[0]!.limitRemaining).toBe(
        pinned.after.units - pinned.after.usedInWindow,
      );
    }
    // Two refreshes later, still one stream each: neither replaced the other's. A refresh
    // is a report the controller received (its record's lastReportMs moves), so the wait
    // counts two of each agent's reports, however late a busy machine sends them.
    const mark = log.lines.length;
    const lastReport = (policy: string) =>
      controller.record(`policy=${policy}`, `i1/${policy}`)?.lastReportMs;
    const twoReports = async (policy: string) => {
      let seen = lastReport(policy);
      for (const n of [1, 2]) {
        const before = seen;
        seen = await waitFor(
          () => (lastReport(policy) !== before ? lastReport(policy) : undefined),
          { what: `report ${n} of ${policy} after the mark`, timeoutMs: 15_000, intervalMs: 20 },
        );
      }
    };
    const startedMs = Date.now();
    await Promise.all([twoReports('alpha'), twoReports('beta')]);
    console.log(`two reports of each agent after the mark in ${Date.now() - startedMs} ms`);
    const streams = log.lines
      .slice(mark)
      .filter((l) => typeof l.msg === 'string' && l.msg === 'quota lease stream');
    expect(streams).toEqual([]);
    expect(log.matching('quota lease stream').map((l) => l['policy'])).toEqual(['alpha', 'beta']);
  });

  it('without SLUICE_LEASE_AGENT, two instances on one host and pid pick different agent names (host, pid, a random part)', async () => {
    const { port } = await rlqsServer();
    const dir = await mkdtemp(join(tmpdir(), 'sluice-lease-agents-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'config.yaml'), CONFIG);
    const start = async () => {
      const svc = await startService({
        envoyConfig: join(dir, 'config.yaml'),
        host: '127.0.0.1',
        port: 0,
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        logger: captureLog('info').logger,
        leases: { controllers: [`127.0.0.1:${port}`], policies: ['alpha'] },
      });
      cleanup.push(() => svc.shutdown());
      return svc;
    };
    // One process, so one host name and one pid: only the random part tells them apart.
    const [a, b] = [await start(), await start()];
    const row = (svc: RunningService) => svc.status.snapshot().leases.allocations[0]!;
    await waitFor(() => ([a, b].every((s) => row(s).mode === 'lease') ? true : undefined), {
      what: 'a lease for each instance',
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    const name = new RegExp(`^${hostname()}-${process.pid}-[0-9a-f]{8}/alpha$`);
    expect(row(a).holder).toMatch(name);
    expect(row(b).holder).toMatch(name);
    expect(row(a).holder).not.toBe(row(b).holder);
  });

  it('speaks mutual TLS to the controller with SLUICE_LEASE_TLS*; without a client certificate it gets no lease', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-lease-tls-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'config.yaml'), CONFIG);
    const ca = await makeCa(dir, 'ca');
    // The controller's certificate names quota.internal, not the address dialled.
    const server = await issueCert(dir, ca, 'controller', { dns: ['quota.internal'] });
    const client = await issueCert(dir, ca, 'agent', { dns: ['sluice'], usages: ['clientAuth'] });
    const { port } = await rlqsServer(
      grpc.ServerCredentials.createSsl(
        ca.cert,
        [{ cert_chain: server.cert, private_key: server.key }],
        true,
      ),
    );
    const start = async (agent: string, env: Record<string, string>) => {
      const leases = readServiceSettings({
        SLUICE_LEASE_CONTROLLERS: `127.0.0.1:${port}`,
        SLUICE_LEASE_POLICIES: 'alpha',
        SLUICE_LEASE_AGENT: agent,
        SLUICE_LEASE_TLS: 'true',
        SLUICE_LEASE_TLS_CACERT: ca.certFile,
        SLUICE_LEASE_TLS_SAN: 'quota.internal',
        ...env,
      }).leases!;
      const svc = await startService({
        envoyConfig: join(dir, 'config.yaml'),
        host: '127.0.0.1',
        port: 0,
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        logger: captureLog('info').logger,
        leases: { ...leases, tls: readLeaseTlsFiles(leases.tlsFiles!) },
      });
      cleanup.push(() => svc.shutdown());
      return svc;
    };
    const mutual = await start('with-cert', {
      SLUICE_LEASE_TLS_CLIENT_CERT: client.certFile,
      SLUICE_LEASE_TLS_CLIENT_KEY: client.keyFile,
    });
    const noCert = await start('no-cert', {});
    const row = (svc: RunningService) => svc.status.snapshot().leases.allocations[0]!;
    await waitFor(() => (row(mutual).mode === 'lease' ? true : undefined), {
      what: 'a lease over mutual TLS',
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    expect(row(mutual)).toMatchObject({ controller: `127.0.0.1:${port}`, fencingToken: 1 });
    // Started at the same time, it never got through the handshake.
    expect(row(noCert)).toMatchObject({ mode: 'fallback', controller: null, fallback: 'deny' });
  });
});
