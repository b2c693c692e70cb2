import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { QuotaController } from '../../src/quota/controller.js';
import {
  RLQS_SERVICE,
  type WireQuotaResponse,
  type WireUsageReports,
} from '../../src/protocol/rlqs-protos.js';
import { startRlqsServer } from '../support/rlqs-server.js';
import { waitFor } from '../support/wait.js';

// RLQS reports carry no acknowledgement. The service infers one from timing on a real
// stream: a report arriving 2δ (2 × marginMs = R) after a lease was sent on the same
// stream proves the client holds that lease or a newer one, so older ones leave the ledger.
const clock = new ManualClock(0);
const controller = new QuotaController(
  { budgets: [{ bucket: 'name=api', ratePerSecond: 1_000 }], refreshMs: 1_000 },
  1,
);
const { port, server, service } = await startRlqsServer(controller, { domain: 'd', clock });
const Client = grpc.makeGenericClientConstructor(RLQS_SERVICE, 'RateLimitQuotaService');
const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
afterAll(() => {
  client.close();
  server.forceShutdown();
});

const usage = (allowed: number): WireUsageReports => ({
  domain: 'd',
  bucketQuotaUsages: [
    {
      bucketId: { bucket: { name: 'api' } },
      timeElapsed: { seconds: 1, nanos: 0 },
      numRequestsAllowed: allowed,
      numRequestsDenied: 0,
    },
  ],
});

describe('RLQS implied acknowledgement', () => {
  it('forgets older leases once a report arrives 2δ after a newer one was sent on the same stream', async () => {
    const md = new grpc.Metadata();
    md.set('sluice-agent', 'a');
    const call = (
      client as unknown as {
        StreamRateLimitQuotas(
          m: grpc.Metadata,
        ): grpc.ClientDuplexStream<WireUsageReports, WireQuotaResponse>;
      }
    ).StreamRateLimitQuotas(md);
    // The stream ends with a status; one that ends in an error (a failed assertion leaves it
    // open, and the server's shutdown cancels it) must not surface as an unhandled error.
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => undefined);
    const got = new Promise<void>((resolve) => call.once('data', () => resolve()));
    call.write(usage(0)); // subscribes at t = 0: lease 1, sent at once
    await got;
    const versions = () => controller.record('name=api', 'a')!.grants.map((g) => g.version);
    const round = controller.round(0); // lease 2, sent at t = 0
    service.pushRound(round.leases, round.abandoned);
    expect(versions()).toEqual([1, 2]);

    // At t = 999 ms (less than 2δ = 1 s after): nothing is proven; both stay counted.
    clock.set(999);
    call.write(usage(10));
    await waitFor(
      () => (controller.record('name=api', 'a')!.lastReportMs === 999 ? true : undefined),
      {
        what: 'the report at 999 ms',
        timeoutMs: 5_000,
        intervalMs: 5,
      },
    );
    expect(versions()).toEqual([1, 2]);

    // At t = 1 s: the client holds lease 2 (or newer); lease 1 is forgotten.
    clock.set(1_000);
    call.write(usage(10));
    await waitFor(
      () => (controller.record('name=api', 'a')!.lastReportMs === 1_000 ? true : undefined),
      {
        what: 'the report at 1000 ms',
        timeoutMs: 5_000,
        intervalMs: 5,
      },
    );
    expect(versions()).toEqual([2]);
    // Half-closed by the client, the stream is closed by the service, before the teardown.
    call.end();
    expect((await status).code).toBe(grpc.status.OK);
  });
});
