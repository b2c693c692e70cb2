import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startQuotaController,
  type QuotaControllerProcess,
} from '../../src/quota/controller-process.js';
import { RedisServer } from '../support/redis-server.js';

// An RLQS client built here from the official protos (the unchanged copies under
// src/protocol/proto/upstream, loaded with keepCase so fields keep their proto names)
// drives a real controller (real gRPC server, real Redis): subscribe, report,
// assignment, TTL expiry and abandon.
const def = loadSync('envoy/service/rate_limit_quota/v3/rlqs.proto', {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: [join(import.meta.dirname, '../../src/protocol/proto/upstream')],
});
type Pkg = {
  envoy: {
    service: { rate_limit_quota: { v3: { RateLimitQuotaService: grpc.ServiceClientConstructor } } };
  };
};
const Client = (grpc.loadPackageDefinition(def) as unknown as Pkg).envoy.service.rate_limit_quota.v3
  .RateLimitQuotaService;

interface Action {
  bucket_id: { bucket: Record<string, string> };
  bucket_action: 'quota_assignment_action' | 'abandon_action';
  quota_assignment_action?: {
    assignment_time_to_live?: { seconds: number; nanos: number };
    rate_limit_strategy?: Record<string, unknown>;
  };
}
interface Seen {
  atMs: number;
  action: Action;
}

const R = 500;
const TTL = 2_000;
let redis: RedisServer;
let controller: QuotaControllerProcess;
beforeAll(async () => {
  redis = await RedisServer.start();
  controller = await startQuotaController({
    redisUrl: redis.url,
    id: 'rlqs-test',
    domain: 'envoy',
    port: 0,
    budgets: [
      { bucket: 'name=api', ratePerSecond: 1_000 },
      { bucket: 'name=batch', ratePerSecond: 100 },
    ],
    refreshMs: R,
    leaseTtlMs: TTL,
    abandonAfterMs: 2_000,
  });
});
afterAll(async () => {
  await controller.close();
  await redis.stop();
});

function open(port = controller.port) {
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = (
    client as unknown as {
      StreamRateLimitQuotas(): grpc.ClientDuplexStream<unknown, { bucket_action: Action[] }>;
    }
  ).StreamRateLimitQuotas();
  const seen: Seen[] = [];
  const waiters = new Set<() => void>();
  let token: string | undefined;
  call.on('metadata', (m: grpc.Metadata) => (token = String(m.get('sluice-fencing-token')[0])));
  call.on('data', (r: { bucket_action: Action[] }) => {
    for (const action of r.bucket_action) seen.push({ atMs: Date.now(), action });
    for (const w of waiters) w();
  });
  const next = (match: (s: Seen) => boolean, from: number, timeoutMs = 5_000) =>
    new Promise<Seen>((resolve, reject) => {
      const check = () => {
        const found = seen.slice(from).find(match);
        if (found) {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(
          new Error(
            `no matching action in ${timeoutMs} ms; saw ${JSON.stringify(seen.slice(from))}`,
          ),
        );
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  const report = (name: string, allowed: number, denied: number, first = false) =>
    call.write({
      ...(first ? { domain: 'envoy' } : {}),
      bucket_quota_usages: [
        {
          bucket_id: { bucket: { name } },
          time_elapsed: { seconds: 0, nanos: R * 1e6 },
          num_requests_allowed: allowed,
          num_requests_denied: denied,
        },
      ],
    });
  return { call, client, seen, next, report, token: () => token };
}
const of = (name: string) => (s: Seen) => s.action.bucket_id.bucket['name'] === name;
const tokensPerSecond = (s: Seen) =>
  (
    s.action.quota_assignment_action?.rate_limit_strategy?.['token_bucket'] as {
      tokens_per_fill?: { value: number };
    }
  )?.tokens_per_fill?.value ?? 0;

describe('RLQS: envoy.service.rate_limit_quota.v3.RateLimitQuotaService', () => {
  it('subscribe, report, assignment with TTL, expiry without renewal, and abandon', async () => {
    const c = open();
    // Subscribe: the first report of a bucket gets an assignment at once.
    c.report('api', 0, 0, true);
    c.report('batch', 0, 0);
    const first = await c.next(of('api'), 0);
    expect(c.token()).toBe(String(controller.token()));
    expect(first.action.bucket_action).toBe('quota_assignment_action');
    expect(first.action.quota_assignment_action!.assignment_time_to_live).toEqual({
      seconds: 2,
      nanos: 0,
    });
    const tb = first.action.quota_assignment_action!.rate_limit_strategy!['token_bucket'] as Record<
      string,
      unknown
    >;
    expect(tb['fill_interval']).toEqual({ seconds: 1, nanos: 0 });
    expect(tokensPerSecond(first)).toBeGreaterThan(0);
    expect(tokensPerSecond(first)).toBeLessThanOrEqual(1_000);

    // Report demand above the budget: rounds push renewed assignments, never above it.
    let mark = c.seen.length;
    for (let i = 0; i < 4; i++) {
      c.report('api', 400, 600);
      await c.next(of('api'), mark);
      mark = c.seen.length;
    }
    const apiRates = c.seen.filter(of('api')).map(tokensPerSecond);
    expect(Math.max(...apiRates)).toBeLessThanOrEqual(1_000);
    expect(apiRates.at(-1)).toBeGreaterThan(900); // alone on the bucket: nearly all of it

    // TTL expiry: `batch` is no longer reported; after the idle time its assignments stop,
    // so the last one it got runs out (2 s) with no renewal.
    const lastBatch = c.seen.filter(of('batch')).at(-1)!;
    await new Promise((r) => setTimeout(r, TTL + R));
    const batchAfter = c.seen.filter((s) => of('batch')(s) && s.atMs > lastBatch.atMs);
    expect(
      batchAfter.filter((s) => s.action.bucket_action === 'quota_assignment_action').length,
    ).toBeLessThanOrEqual(1);
    expect(c.seen.filter(of('batch')).at(-1)!.atMs + TTL).toBeLessThan(Date.now());

    // Abandon: `api` reported with no usage for abandonAfterMs (2 s).
    mark = c.seen.length;
    const zeros = setInterval(() => c.report('api', 0, 0), R);
    const abandon = await c.next(
      (s) => of('api')(s) && s.action.bucket_action === 'abandon_action',
      mark,
      6_000,
    );
    clearInterval(zeros);
    expect(abandon.action.bucket_id.bucket).toEqual({ name: 'api' });

    // Never ALLOW_ALL: every strategy is a token bucket or DENY_ALL.
    for (const s of c.seen) {
      const st = s.action.quota_assignment_action?.rate_limit_strategy;
      if (st === undefined) continue;
      expect(st['token_bucket'] !== undefined || st['blanket_rule'] === 'DENY_ALL').toBe(true);
    }
    c.call.end();
    c.client.close();
  }, 30_000);

  it('refuses a stream for another domain, naming it', async () => {
    const c = open();
    const error = new Promise<grpc.ServiceError>((resolve) => c.call.on('error', resolve));
    c.call.write({
      domain: 'other',
      bucket_quota_usages: [
        { bucket_id: { bucket: { name: 'api' } }, time_elapsed: { seconds: 1 } },
      ],
    });
    const e = await error;
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toBe('domain must be "envoy", got "other"');
    expect(e.metadata.get('sluice-error-code')).toEqual(['SLUICE_ERR_PROTOCOL_BAD_REQUEST']);
    c.client.close();
  });

  it('a follower refuses streams with UNAVAILABLE, so clients move to the leader', async () => {
    const follower = await startQuotaController({
      redisUrl: redis.url,
      id: 'rlqs-follower',
      domain: 'envoy',
      port: 0,
      budgets: [{ bucket: 'name=api', ratePerSecond: 1_000 }],
      refreshMs: R,
      leaseTtlMs: TTL,
    });
    try {
      expect(follower.token()).toBe(0);
      const c = open(follower.port);
      const error = new Promise<grpc.ServiceError>((resolve) => c.call.on('error', resolve));
      c.report('api', 0, 0, true);
      const e = await error;
      expect(e.code).toBe(grpc.status.UNAVAILABLE);
      expect(e.details).toBe('this controller does not lead');
      expect(e.metadata.get('sluice-error-code')).toEqual(['SLUICE_ERR_QUOTA_NOT_LEADER']);
      c.client.close();
    } finally {
      await follower.close();
    }
  });
});
