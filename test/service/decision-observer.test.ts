/**
 * What the service tells its decision observers, through the real servers: envoy rules
 * over gRPC (with `x-request-id` metadata) and native policies over HTTP each reach the
 * status page's tally and the decision log under their public names, with the identity
 * hashed as the store's hot keys hash it.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../src/service/main.js';
import { identityHash } from '../../src/stores/identity-hash.js';
import { captureLog, type CapturedLog } from '../support/captured-log.js';
import { startExampleService } from '../support/loopback-service.js';
import { call, connect, type Clients } from './grpc/client.js';

let svc: RunningService;
let clients: Clients;
let log: CapturedLog;

beforeAll(async () => {
  log = captureLog('info');
  svc = await startExampleService({ logger: log.logger, decisionLogSampleRate: 1 });
  clients = connect(svc.grpcPort);
});

afterAll(async () => {
  clients?.close();
  await svc?.shutdown();
});

const rls = (tenant: string, requestId: string) => {
  const metadata = new grpc.Metadata();
  metadata.set('x-request-id', requestId);
  return call(
    clients.rls,
    'ShouldRateLimit',
    {
      domain: 'payments',
      descriptors: [
        { entries: [{ key: 'tenant', value: tenant }] },
        {
          entries: [
            { key: 'tenant', value: tenant },
            { key: 'route', value: 'POST /transfers' },
          ],
        },
      ],
    },
    5_000,
    metadata,
  );
};

describe('decision observers', () => {
  it('envoy rules over gRPC: rule names, hashed identity, the x-request-id metadata', async () => {
    await rls('acme', 'grpc-req-1');
    // Not a well-formed id (a space): left out rather than logged.
    await rls('acme', 'bad id');
    const lines = log.matching('decision');
    expect(lines.map((l) => [l['policy'], l['identity'], l['requestId']])).toEqual([
      ['payments.tenant', identityHash('acme'), 'grpc-req-1'],
      ['payments-transfers', identityHash('acme'), 'grpc-req-1'],
      ['payments.tenant', identityHash('acme'), undefined],
      ['payments-transfers', identityHash('acme'), undefined],
    ]);
    const tally = svc.status.snapshot().decisions;
    expect(tally.map((d) => [d.policy, d.total.decisions])).toEqual([
      ['payments-transfers', 2],
      ['payments.tenant', 2],
    ]);
  });

  it('native policies over HTTP, and the policies in force from both configs', async () => {
    const r = await fetch(`http://127.0.0.1:${svc.httpPort}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'http-req-1' },
      body: JSON.stringify({ descriptor: { tenant: 'globex', route: 'POST /transfers' } }),
    });
    expect(r.status).toBe(200);
    const last = log.matching('decision').at(-1)!;
    expect(last).toMatchObject({
      policy: 'payments-tenant',
      identity: identityHash('globex'),
      requestId: 'http-req-1',
      remaining: 15, // burst 20, a transfer costs 5
    });
    const policies = svc.status.snapshot().config.policies;
    expect(policies.map((p) => [p.name, p.source, p.domain, p.algorithm, p.limit])).toEqual([
      [
        'payments-tenant',
        'sluice',
        undefined,
        'token-bucket',
        'capacity 20, full after 200 ms idle',
      ],
      ['payments.tenant', 'envoy', 'payments', 'fixed-window', '100 per minute'],
      ['payments-transfers', 'envoy', 'payments', 'token-bucket', '20 per second'],
    ]);
  });
});
