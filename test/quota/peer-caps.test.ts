/**
 * The per-stream caps over a real gRPC server (RlqsQuotaService with its own definition,
 * so over-cap messages are refused from their bytes): reports per second and distinct
 * buckets per stream, each refused whole with RESOURCE_EXHAUSTED naming the cap, and
 * counted by reason.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { QuotaController } from '../../src/quota/controller.js';
import { RlqsQuotaService } from '../../src/quota/rlqs/quota-service.js';
import { manyBuckets, rawRlqs } from './fixtures/raw-rlqs.js';

const RESOURCE_EXHAUSTED = 8;
const refusals: string[] = [];
const service = new RlqsQuotaService({
  domain: 'test',
  clock: systemClock,
  caps: { maxReportsPerSecond: 5, maxBucketsPerAgent: 20, maxBucketsPerMessage: 10 },
  onRefusal: (reason) => refusals.push(reason),
});
service.lead(new QuotaController({ budgets: [{ bucket: 'name=api', ratePerSecond: 100 }] }, 1));
const server = new grpc.Server();
server.addService(service.definition(), service.handlers());
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
    e ? reject(e) : resolve(p),
  ),
);
const raw = rawRlqs(`127.0.0.1:${port}`);
afterAll(async () => {
  raw.close();
  await new Promise<void>((r) => server.tryShutdown(() => r()));
});

describe('per-stream caps', () => {
  it('more messages in a second than --max-reports-per-second: refused RESOURCE_EXHAUSTED', async () => {
    const s = raw.open('fast');
    for (let i = 0; i < 20; i++) s.send(manyBuckets(1, 'api-'), i === 0 ? 'test' : undefined);
    const end = await s.ended(10_000);
    expect(end?.code).toBe(RESOURCE_EXHAUSTED);
    expect(end?.sluiceCode).toBe('SLUICE_ERR_QUOTA_CAP_EXCEEDED');
    expect(end?.details).toContain('--max-reports-per-second 5');
    expect(refusals).toContain('report-rate');
  });

  it('more distinct buckets on one stream than --max-buckets-per-agent: the third message refused whole', async () => {
    const s = raw.open('wide');
    s.send(manyBuckets(10, 'a-'), 'test');
    s.send(manyBuckets(10, 'b-'));
    s.send(manyBuckets(1, 'c-'));
    const end = await s.ended(10_000);
    expect(end?.code).toBe(RESOURCE_EXHAUSTED);
    expect(end?.details).toContain('21 distinct buckets on one stream');
    expect(end?.details).toContain('--max-buckets-per-agent 20');
    expect(refusals).toContain('buckets-per-agent');
  });

  it('eleven buckets in one message: refused from its bytes, naming --max-buckets-per-message 10', async () => {
    const s = raw.open('big');
    s.send(manyBuckets(11, 'x-'), 'test');
    const end = await s.ended(10_000);
    expect(end?.code).toBe(RESOURCE_EXHAUSTED);
    expect(end?.details).toContain('--max-buckets-per-message 10');
  });
});
