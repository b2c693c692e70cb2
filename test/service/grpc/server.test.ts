import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScriptedHandlers } from '../scripted-handlers.js';
import { createGrpcServer, type GrpcServer } from '../../../src/service/grpc/server.js';
import type {
  NativeCheckRequest,
  NativeCheckResponse,
  RlsRequest,
  RlsResponse,
} from '../../../src/protocol/messages.js';
import type { CallContext, GrpcHandlers } from '../../../src/service/grpc/handlers.js';
import { call, connect, watch, type Clients } from './client.js';

// The transport is tested through real servers and real clients: these handlers are
// pure functions of the request, so every field that comes back was put there by the
// handler and carried by the transport. Keys in the descriptor steer them: `deny` is
// over limit, `slow` waits for the test to release it, `fail-*` throws.

class Handlers extends ScriptedHandlers implements GrpcHandlers {
  readonly rlsSeen: RlsRequest[] = [];
  readonly checkSeen: NativeCheckRequest[] = [];
  async shouldRateLimit(req: RlsRequest, context: CallContext): Promise<RlsResponse> {
    this.rlsSeen.push(req);
    await this.steer(
      req.descriptors.flatMap((d) => d.entries.map((e) => e.key)),
      context,
    );
    const statuses = req.descriptors.map((d) => {
      const over = d.entries.some((e) => e.key === 'deny');
      return {
        code: over ? ('OVER_LIMIT' as const) : ('OK' as const),
        currentLimit: {
          name: d.entries.map((e) => `${e.key}=${e.value}`).join('|'),
          requestsPerUnit: d.limit?.requestsPerUnit ?? 100,
          unit: d.limit?.unit ?? ('WEEK' as const),
        },
        limitRemaining: 100.9 - (d.hitsAddend ?? req.hitsAddend), // floored on the wire
        durationUntilResetMs: 1500.25,
      };
    });
    if (req.domain === 'short') return { overallCode: 'OK', statuses: [] }; // a broken handler
    return {
      overallCode: statuses.some((s) => s.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK',
      statuses:
        req.domain === 'bare'
          ? statuses.map(({ code }) => ({ code, limitRemaining: 0 }))
          : statuses,
      ...(req.domain === 'bare'
        ? {}
        : {
            responseHeadersToAdd: [{ key: 'x-ratelimit-limit', value: '100' }],
            requestHeadersToAdd: [{ key: 'x-domain', value: req.domain }],
            rawBody: new TextEncoder().encode('slow down'),
            dynamicMetadata: {
              domain: req.domain,
              n: 2,
              ok: true,
              none: null,
              list: [1, 'a'],
              nested: { k: 'v' },
            },
          }),
    };
  }

  async check(req: NativeCheckRequest, context: CallContext): Promise<NativeCheckResponse> {
    this.checkSeen.push(req);
    await this.steer(
      req.entries.map((e) => e.key),
      context,
    );
    const allowed = !req.entries.some((e) => e.key === 'deny');
    return {
      allowed,
      status: allowed ? 'OK' : 'OVER_LIMIT',
      retryAfterMs: allowed ? 0 : 250.2,
      resetAfterMs: 999.001,
      remaining: 4.5,
      limit: 10,
      policy: 'per-tenant',
      ...(req.entries.some((e) => e.key === 'delay') ? { delayMs: 12.5 } : {}),
      decisions: [
        {
          status: allowed ? 'OK' : 'OVER_LIMIT',
          allowed,
          limit: 10,
          remaining: 4.5,
          retryAfterMs: allowed ? 0 : 250.2,
          resetAfterMs: 999.001,
          policy: 'per-tenant',
          path: 'store',
        },
        {
          status: 'UNAVAILABLE',
          allowed: true,
          limit: 5,
          remaining: 0,
          retryAfterMs: 0,
          resetAfterMs: 0,
          policy: 'global',
          path: 'fail-open',
        },
      ],
    };
  }
}

async function start(
  handlers: Handlers,
  options: Parameters<typeof createGrpcServer>[1] = {},
): Promise<{ server: GrpcServer; clients: Clients }> {
  const server = createGrpcServer(handlers, options);
  const port = await server.listen('127.0.0.1', 0);
  expect(server.port).toBe(port);
  return { server, clients: connect(port) };
}

describe('GrpcServer: requests and responses', () => {
  const handlers = new Handlers();
  const errors: [unknown, string][] = [];
  let server: GrpcServer;
  let clients: Clients;

  beforeAll(async () => {
    ({ server, clients } = await start(handlers, { onError: (e, m) => errors.push([e, m]) }));
  });
  afterAll(async () => {
    clients.close();
    await server.shutdown();
  });

  it('ShouldRateLimit: decodes the request and carries every response field back', async () => {
    const response = await call(clients.rls, 'ShouldRateLimit', {
      domain: 'edge',
      hitsAddend: 0,
      descriptors: [
        {
          entries: [
            { key: 'tenant', value: 'acme' },
            { key: 'path', value: '' },
          ],
        },
        {
          entries: [{ key: 'deny', value: 'x' }],
          limit: { requestsPerUnit: 7, unit: 'HOUR' },
          hitsAddend: { value: 0 },
        },
      ],
    });
    expect(handlers.rlsSeen.at(-1)).toEqual({
      domain: 'edge',
      hitsAddend: 1, // unset on the wire means 1
      descriptors: [
        {
          entries: [
            { key: 'tenant', value: 'acme' },
            { key: 'path', value: '' },
          ],
        },
        {
          entries: [{ key: 'deny', value: 'x' }],
          limit: { requestsPerUnit: 7, unit: 'HOUR' },
          hitsAddend: 0,
        },
      ],
    });
    expect(response).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OK',
          currentLimit: { name: 'tenant=acme|path=', requestsPerUnit: 100, unit: 'WEEK' },
          limitRemaining: 99, // 100.9 - 1, floored
          durationUntilReset: { seconds: 1, nanos: 500_250_000 },
          quota: null,
        },
        {
          code: 'OVER_LIMIT',
          currentLimit: { name: 'deny=x', requestsPerUnit: 7, unit: 'HOUR' },
          limitRemaining: 100,
          durationUntilReset: { seconds: 1, nanos: 500_250_000 },
          quota: null,
        },
      ],
      responseHeadersToAdd: [{ key: 'x-ratelimit-limit', value: '100' }],
      requestHeadersToAdd: [{ key: 'x-domain', value: 'edge' }],
      rawBody: Buffer.from('slow down'),
      dynamicMetadata: {
        fields: {
          domain: { stringValue: 'edge', kind: 'stringValue' },
          n: { numberValue: 2, kind: 'numberValue' },
          ok: { boolValue: true, kind: 'boolValue' },
          none: { nullValue: 'NULL_VALUE', kind: 'nullValue' },
          list: {
            listValue: {
              values: [
                { numberValue: 1, kind: 'numberValue' },
                { stringValue: 'a', kind: 'stringValue' },
              ],
            },
            kind: 'listValue',
          },
          nested: {
            structValue: { fields: { k: { stringValue: 'v', kind: 'stringValue' } } },
            kind: 'structValue',
          },
        },
      },
      quota: null,
    });
  });

  it('ShouldRateLimit: absent optional fields stay absent; request hits_addend is kept', async () => {
    const response = await call(clients.rls, 'ShouldRateLimit', {
      domain: 'bare',
      hitsAddend: 3,
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    expect(handlers.rlsSeen.at(-1)?.hitsAddend).toBe(3);
    expect(response).toEqual({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: null,
          limitRemaining: 0,
          durationUntilReset: null,
          quota: null,
        },
      ],
      responseHeadersToAdd: [],
      requestHeadersToAdd: [],
      rawBody: Buffer.alloc(0),
      dynamicMetadata: null,
      quota: null,
    });
  });

  it('Check: decodes the request and carries every response field back, enums as names', async () => {
    const response = await call(clients.sluice, 'Check', {
      entries: [
        { key: 'tenant', value: 'acme' },
        { key: 'deny', value: '1' },
        { key: 'delay', value: '1' },
      ],
      cost: 0,
      requestId: 'req-1',
      policies: ['per-tenant', 'global'],
    });
    expect(handlers.checkSeen.at(-1)).toEqual({
      entries: [
        { key: 'tenant', value: 'acme' },
        { key: 'deny', value: '1' },
        { key: 'delay', value: '1' },
      ],
      cost: 0,
      requestId: 'req-1',
      policies: ['per-tenant', 'global'],
    });
    expect(response).toEqual({
      allowed: false,
      status: 'OVER_LIMIT',
      retryAfterMs: 251, // 250.2 rounded up
      resetAfterMs: 1000, // 999.001 rounded up
      remaining: 4.5,
      limit: 10,
      policy: 'per-tenant',
      delayMs: 13,
      _delayMs: 'delayMs',
      decisions: [
        {
          allowed: false,
          status: 'OVER_LIMIT',
          retryAfterMs: 251,
          resetAfterMs: 1000,
          remaining: 4.5,
          limit: 10,
          policy: 'per-tenant',
          path: 'STORE',
        },
        {
          allowed: true,
          status: 'UNAVAILABLE',
          retryAfterMs: 0,
          resetAfterMs: 0,
          remaining: 0,
          limit: 5,
          policy: 'global',
          path: 'FAIL_OPEN',
        },
      ],
    });
  });

  it('Check: unset cost, request_id and policies reach the handler as absent', async () => {
    await call(clients.sluice, 'Check', { entries: [{ key: 'tenant', value: 'acme' }] });
    expect(handlers.checkSeen.at(-1)).toEqual({ entries: [{ key: 'tenant', value: 'acme' }] });
  });

  it("passes the client's deadline to the handler as timeoutMs", async () => {
    await call(clients.sluice, 'Check', { entries: [{ key: 'a', value: 'b' }] }, 3_000);
    const { timeoutMs, signal } = handlers.contexts.at(-1)!;
    expect(timeoutMs).toBeGreaterThan(0);
    expect(timeoutMs).toBeLessThanOrEqual(3_000);
    expect(signal.aborted).toBe(false);
  });

  it('health: "" and "ratelimit" are SERVING; an unknown name is NOT_FOUND', async () => {
    for (const service of ['', 'ratelimit', 'envoy.service.ratelimit.v3.RateLimitService']) {
      await expect(call(clients.health, 'Check', { service })).resolves.toEqual({
        status: 'SERVING',
      });
    }
    await expect(call(clients.health, 'Check', { service: 'nope' })).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
    });
  });

  const malformed: [string, string, object, string][] = [
    [
      'ShouldRateLimit',
      'no domain',
      { descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] },
      'rate limit domain must not be empty', // upstream's words
    ],
    [
      'ShouldRateLimit',
      'no descriptors',
      { domain: 'd' },
      'rate limit descriptor list must not be empty',
    ],
    [
      'ShouldRateLimit',
      'a descriptor without entries',
      { domain: 'd', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }, {}] },
      'bad RateLimitRequest: descriptors[1].entries must have at least one entry',
    ],
    [
      'ShouldRateLimit',
      'an empty key',
      {
        domain: 'd',
        descriptors: [
          {
            entries: [
              { key: 'a', value: 'b' },
              { key: '', value: 'c' },
            ],
          },
        ],
      },
      'bad RateLimitRequest: descriptors[0].entries[1].key is empty',
    ],
    [
      'ShouldRateLimit',
      'an override without a unit',
      {
        domain: 'd',
        descriptors: [{ entries: [{ key: 'a', value: 'b' }], limit: { requestsPerUnit: 5 } }],
      },
      'bad RateLimitRequest: descriptors[0].limit.unit must be one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR; got UNKNOWN',
    ],
    [
      'ShouldRateLimit',
      'a hits_addend past 2^53 - 1',
      {
        domain: 'd',
        descriptors: [
          { entries: [{ key: 'a', value: 'b' }], hitsAddend: { value: '9007199254740993' } },
        ],
      },
      'bad RateLimitRequest: descriptors[0].hits_addend must be a whole number of at most 2^53 - 1',
    ],
    [
      'ShouldRateLimit',
      'a refund',
      { domain: 'd', descriptors: [{ entries: [{ key: 'a', value: 'b' }], isNegativeHits: true }] },
      'bad RateLimitRequest: descriptors[0].is_negative_hits is not supported',
    ],
    ['Check', 'no entries', { cost: 1 }, 'bad CheckRequest: entries must have at least one entry'],
    [
      'Check',
      'an empty key',
      { entries: [{ key: '', value: 'v' }] },
      'bad CheckRequest: entries[0].key is empty',
    ],
    [
      'Check',
      'a cost past 2^53 - 1',
      { entries: [{ key: 'k', value: 'v' }], cost: '18446744073709551615' },
      'bad CheckRequest: cost must be a whole number of at most 2^53 - 1',
    ],
    [
      'Check',
      'an empty policy name',
      { entries: [{ key: 'k', value: 'v' }], policies: ['a', ''] },
      'bad CheckRequest: policies[1] is empty',
    ],
  ];

  it.each(malformed)(
    '%s with %s fails INVALID_ARGUMENT with a clear message',
    async (method, _, request, details) => {
      const client = method === 'Check' ? clients.sluice : clients.rls;
      const before = handlers.rlsSeen.length + handlers.checkSeen.length;
      const error = await call(client, method, request).catch((e: grpc.ServiceError) => e);
      expect(error).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details });
      expect((error as grpc.ServiceError).metadata.get('sluice-error-code')).toEqual([
        'SLUICE_ERR_PROTOCOL_BAD_REQUEST',
      ]);
      expect(handlers.rlsSeen.length + handlers.checkSeen.length).toBe(before);
    },
  );

  it('SluiceErrors from handlers answer with their registry status and message', async () => {
    const policy = await call(clients.sluice, 'Check', {
      entries: [{ key: 'fail-policy', value: '' }],
    }).catch((e: grpc.ServiceError) => e);
    expect(policy).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'unknown policy "nope"; loaded: a, b',
    });
    expect((policy as grpc.ServiceError).metadata.get('sluice-error-code')).toEqual([
      'SLUICE_ERR_POLICY_UNKNOWN',
    ]);
    const store = await call(clients.rls, 'ShouldRateLimit', {
      domain: 'd',
      descriptors: [{ entries: [{ key: 'fail-store', value: '' }] }],
    }).catch((e: grpc.ServiceError) => e);
    expect(store).toMatchObject({
      code: grpc.status.DEADLINE_EXCEEDED,
      details: 'store did not answer within 20ms',
    });
  });

  it('other handler failures answer INTERNAL without their text, and reach onError', async () => {
    errors.length = 0;
    const bug = await call(clients.sluice, 'Check', {
      entries: [{ key: 'fail-bug', value: '' }],
    }).catch((e: grpc.ServiceError) => e);
    expect(bug).toMatchObject({ code: grpc.status.INTERNAL, details: 'internal error' });
    expect(JSON.stringify(bug)).not.toContain('hunter2');
    const short = await call(clients.rls, 'ShouldRateLimit', {
      domain: 'short',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    }).catch((e: grpc.ServiceError) => e);
    expect(short).toMatchObject({ code: grpc.status.INTERNAL, details: 'internal error' });
    expect(errors.map(([e, m]) => [(e as Error).message, m])).toEqual([
      ['secret: redis://user:hunter2@10.0.0.1', '/sluice.v1.Sluice/Check'],
      [
        'handler returned 0 statuses for 1 descriptors',
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      ],
    ]);
  });
});

describe('GrpcServer: shutdown', () => {
  it('finishes an in-flight call, refuses new ones and turns health NOT_SERVING', async () => {
    const handlers = new Handlers();
    const { server, clients } = await start(handlers, { shutdownTimeoutMs: 10_000 });
    const watching = watch(clients.health, 'ratelimit');
    expect(await watching.nth(0)).toBe('SERVING');

    const slow = call<{ allowed: boolean }>(clients.sluice, 'Check', {
      entries: [{ key: 'slow', value: '1' }],
    });
    await handlers.slowStarted.promise;
    const closing = server.shutdown();
    expect(server.shutdown()).toBe(closing);

    expect(await watching.nth(1)).toBe('NOT_SERVING');
    expect(await watching.ended).toBe(grpc.status.OK);

    const late = connect(server.port!);
    await expect(
      call(late.sluice, 'Check', { entries: [{ key: 'a', value: 'b' }] }, 2_000),
    ).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    late.close();

    handlers.slowRelease.resolve();
    await expect(slow).resolves.toMatchObject({ allowed: true });
    await expect(closing).resolves.toEqual({ forced: false });
    expect(handlers.contexts[0]!.signal.aborted).toBe(false);
    clients.close();
  });

  it('keeps serving during drainDelayMs, with health already NOT_SERVING', async () => {
    const { server, clients } = await start(new Handlers(), { drainDelayMs: 1_000 });
    await expect(call(clients.health, 'Check', { service: '' })).resolves.toEqual({
      status: 'SERVING',
    });
    const closing = server.shutdown();
    await expect(call(clients.health, 'Check', { service: '' })).resolves.toEqual({
      status: 'NOT_SERVING',
    });
    await expect(
      call(clients.sluice, 'Check', { entries: [{ key: 'a', value: 'b' }] }),
    ).resolves.toMatchObject({ allowed: true });
    await expect(closing).resolves.toEqual({ forced: false });
    clients.close();
  });

  it('cancels calls still running after shutdownTimeoutMs and aborts their signal', async () => {
    const handlers = new Handlers();
    const { server, clients } = await start(handlers, { shutdownTimeoutMs: 100 });
    const slow = call(clients.sluice, 'Check', { entries: [{ key: 'slow', value: '1' }] }).catch(
      (e: grpc.ServiceError) => e,
    );
    await handlers.slowStarted.promise;
    await expect(server.shutdown()).resolves.toEqual({ forced: true });
    expect(await slow).toMatchObject({ code: expect.any(Number) });
    expect(((await slow) as grpc.ServiceError).code).not.toBe(grpc.status.OK);
    expect(handlers.contexts[0]!.signal.aborted).toBe(true);
    handlers.slowRelease.resolve();
    clients.close();
  });

  it('listen() after shutdown() is refused', async () => {
    const server = createGrpcServer(new Handlers());
    await server.shutdown();
    await expect(server.listen('127.0.0.1', 0)).rejects.toThrow(/once, before shutdown/);
  });
});
