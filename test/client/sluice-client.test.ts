/**
 * SluiceClient against a real in-process `sluice serve` (memory store, example configs),
 * a closed port, and a TCP server that accepts and never answers.
 */
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceClient, type ClientFailureMode } from '../../src/client.js';
import { PolicyError, ProtocolError } from '../../src/core/errors.js';
import type { RunningService } from '../../src/service/main.js';
import { call, connect, type Clients } from '../service/grpc/client.js';
import { listen, type Listening } from '../support/listen.js';
import { startExampleService } from '../support/loopback-service.js';

let svc: RunningService;
let raw: Clients;
const opened: SluiceClient[] = [];
const servers: Listening[] = [];

function client(address: string, failureMode?: ClientFailureMode, timeoutMs = 2_000) {
  const c = new SluiceClient({ address, timeoutMs, ...(failureMode ? { failureMode } : {}) });
  opened.push(c);
  return c;
}

/** Listens on a free port, closed after the suite. */
async function listenPort(server: Server): Promise<number> {
  const s = await listen(server);
  servers.push(s);
  return s.port;
}

beforeAll(async () => {
  // Time stands still in the service: no refill between two checks, however slow.
  svc = await startExampleService();
  raw = connect(svc.grpcPort);
});
afterAll(async () => {
  opened.forEach((c) => c.close());
  raw?.close();
  await svc?.shutdown();
  for (const s of servers) await s.close();
});

const transfer = (tenant: string) => ({ tenant, route: 'POST /transfers' });

describe('SluiceClient against the service', () => {
  // payments-tenant: token bucket, burst 20, 100/s; a transfer costs 5. Two checks of
  // cost 20 under a still clock: the second would need 200 ms of refill, so it is denied.
  it("answers the service's decisions: OK, then OVER_LIMIT with the policy name", async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`);
    await c.ready();
    const mine = [];
    const theirs: { allowed: boolean; status: string; policy: string; limit: number }[] = [];
    for (let i = 0; i < 2; i++) {
      mine.push(await c.check(transfer('client-a'), { cost: 20 }));
      theirs.push(
        await call(raw.sluice, 'Check', {
          entries: [
            { key: 'tenant', value: 'client-b' },
            { key: 'route', value: 'POST /transfers' },
          ],
          cost: 20,
        }),
      );
    }
    expect(mine.map((r) => r.status)).toEqual(['OK', 'OVER_LIMIT']);
    expect(mine.map((r) => [r.allowed, r.status, r.policy, r.limit])).toEqual(
      theirs.map((r) => [r.allowed, r.status, r.policy, r.limit]),
    );
    expect(mine.every((r) => r.path === 'service')).toBe(true);
    const denied = mine[1]!;
    expect(denied).toMatchObject({ allowed: false, policy: 'payments-tenant', limit: 20 });
    expect(denied.retryAfterMs).toBe(200); // 20 units at 100/s
    expect(denied.decisions).toEqual([
      expect.objectContaining({
        policy: 'payments-tenant',
        path: 'store',
        status: 'OVER_LIMIT',
        allowed: false,
      }),
    ]);
  });

  it("applies the service's cost rules when no cost is given", async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`);
    const r = await c.check(transfer('client-rules'));
    expect(r).toMatchObject({ allowed: true, status: 'OK', remaining: 15, path: 'service' });
  });

  it('accepts the descriptor as entries and honours cost', async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`);
    const r = await c.check([{ key: 'tenant', value: 'client-entries' }], { cost: 20 });
    expect(r).toMatchObject({ allowed: true, status: 'OK', path: 'service', remaining: 0 });
    expect((await c.check({ tenant: 'client-entries' }, { cost: 20 })).status).toBe('OVER_LIMIT');
  });

  it('reuses one channel and one TCP connection across 100 calls', async () => {
    let connections = 0;
    const proxy = createServer((downstream: Socket) => {
      connections++;
      const upstream = tcpConnect(svc.grpcPort, '127.0.0.1');
      downstream.pipe(upstream).pipe(downstream);
      downstream.on('error', () => upstream.destroy());
      upstream.on('error', () => downstream.destroy());
    });
    const port = await listenPort(proxy);
    const c = client(`127.0.0.1:${port}`);
    const channel = c.channel;
    for (let i = 0; i < 50; i++) await c.check({ tenant: 'reuse' }, { cost: 0 });
    const rest = await Promise.all(
      Array.from({ length: 50 }, () => c.check({ tenant: 'reuse' }, { cost: 0 })),
    );
    expect(rest.every((r) => r.path === 'service' && r.allowed)).toBe(true);
    expect(c.channel).toBe(channel);
    expect(connections).toBe(1);
  });

  // protobufjs would send cost -1 as 0 (a read that always passes), so the service can
  // never see it; the client refuses it with the limiter's code and message.
  it("rejects cost -1 before sending, with the limiter's message", async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`, 'open');
    const err = await c.check({ tenant: 'x' }, { cost: -1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    expect(err).toMatchObject({
      code: 'SLUICE_ERR_COST_INVALID',
      message: 'cost must be a non-negative safe integer, got -1',
    });
  });

  it("rejects the service's INVALID_ARGUMENT with its code and message", async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`, 'open');
    const request = { entries: [{ key: 'tenant', value: 'x' }], policies: ['no-such-policy'] };
    const theirs = (await call(raw.sluice, 'Check', request).catch((e: unknown) => e)) as {
      code: number;
      details: string;
    };
    expect(theirs.code).toBe(3);
    const err = await c
      .check({ tenant: 'x' }, { policies: ['no-such-policy'] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    expect(err).toMatchObject({ code: 'SLUICE_ERR_POLICY_UNKNOWN', message: theirs.details });
    const empty = await c.check({}).catch((e: unknown) => e);
    expect(empty).toBeInstanceOf(ProtocolError);
    expect(empty).toMatchObject({ code: 'SLUICE_ERR_PROTOCOL_BAD_REQUEST' });
    expect((empty as Error).message).toMatch(/entries must have at least one entry/);
  });

  it("rejects a descriptor the service refuses with the service's PolicyError", async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`, 'open');
    const err = await c
      .check([
        { key: 'tenant', value: 'a' },
        { key: 'tenant', value: 'b' },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    expect(err).toMatchObject({ code: 'SLUICE_ERR_DESCRIPTOR_INVALID' });
  });

  it('refuses a cost the wire would truncate, and a bad timeout, before sending', async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`, 'open');
    await expect(c.check({ tenant: 'x' }, { cost: 1.5 })).rejects.toMatchObject({
      code: 'SLUICE_ERR_COST_INVALID',
    });
    await expect(c.check({ tenant: 'x' }, { cost: Number.NaN })).rejects.toBeInstanceOf(
      PolicyError,
    );
    await expect(c.check({ tenant: 'x' }, { timeoutMs: 0 })).rejects.toMatchObject({
      code: 'SLUICE_ERR_TIMEOUT_INVALID',
    });
  });

  it('rejects checks after close()', async () => {
    const c = client(`127.0.0.1:${svc.grpcPort}`);
    c.close();
    await expect(c.check({ tenant: 'x' })).rejects.toThrow(/after close/);
  });
});

// A port nothing listens on: bound once, then released.
async function closedPort(): Promise<number> {
  const s = await listen(createServer());
  await s.close();
  return s.port;
}

const SLACK_MS = 1_000;

describe.each<[ClientFailureMode, object]>([
  ['open', { allowed: true, status: 'OK', path: 'fail-open' }],
  ['closed', { allowed: false, status: 'UNAVAILABLE', path: 'fail-closed' }],
])('SluiceClient failure mode %s', (mode, expected) => {
  it('answers a closed port by the failure mode within the deadline', async () => {
    const timeoutMs = 200;
    const c = client(`127.0.0.1:${await closedPort()}`, mode, timeoutMs);
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const r = await c.check(transfer('down'));
      expect(performance.now() - started).toBeLessThan(timeoutMs + SLACK_MS);
      expect(r).toMatchObject({ ...expected, decisions: [], retryAfterMs: 0 });
      expect(r.status).not.toBe('OVER_LIMIT');
      expect(r.failure?.code).toMatch(/^(UNAVAILABLE|DEADLINE_EXCEEDED)$/);
    }
  });

  it('answers a service slower than the deadline by the failure mode', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((s) => {
      sockets.push(s); // accept, never answer
      s.on('error', () => undefined);
    });
    const port = await listenPort(silent);
    const timeoutMs = 150;
    const c = client(`127.0.0.1:${port}`, mode, timeoutMs);
    const started = performance.now();
    const r = await c.check(transfer('slow'));
    const elapsed = performance.now() - started;
    expect(r).toMatchObject({ ...expected, failure: { code: 'DEADLINE_EXCEEDED' } });
    expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 20);
    expect(elapsed).toBeLessThan(timeoutMs + SLACK_MS);
    expect(sockets.length).toBeGreaterThanOrEqual(1);
    // A per-call deadline overrides the client's.
    const quick = performance.now();
    expect(await c.check(transfer('slow'), { timeoutMs: 30 })).toMatchObject(expected);
    expect(performance.now() - quick).toBeLessThan(30 + SLACK_MS);
    c.close();
    sockets.forEach((s) => s.destroy());
  });
});
