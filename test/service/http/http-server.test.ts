import * as http from 'node:http';
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deferred, ScriptedHandlers } from '../scripted-handlers.js';
import { ServiceMetrics } from '../../../src/metrics/service-metrics.js';
import type {
  NativeCheckRequest,
  NativeCheckResponse,
  RlsRequest,
  RlsResponse,
} from '../../../src/protocol/messages.js';
import type { CallContext } from '../../../src/service/grpc/handlers.js';
import {
  HttpServer,
  type HttpHandlers,
  type HttpServerOptions,
} from '../../../src/service/http/http-server.js';

// The transport is tested through real servers and Node's fetch. The handlers are pure
// functions of the request, so every field that comes back was put there by the handler
// and carried by the transport. Keys in the descriptor steer them: `deny` is over limit,
// `down` unavailable, `slow` waits for the test to release it, `fail-*` throws.

const RLCONFIG =
  'edge.tenant: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false\n';

class Handlers extends ScriptedHandlers implements HttpHandlers {
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
      const hits = d.hitsAddend ?? req.hitsAddend;
      return {
        code: over ? ('OVER_LIMIT' as const) : ('OK' as const),
        currentLimit: {
          name: d.entries.map((e) => `${e.key}=${e.value}`).join('|'),
          requestsPerUnit: d.limit?.requestsPerUnit ?? 100,
          unit: d.limit?.unit ?? ('MINUTE' as const),
        },
        limitRemaining: over ? 0 : 100.9 - hits, // floored on the wire; 0 is left out
        durationUntilResetMs: over ? 59_000 : 1500.25,
      };
    });
    const overallCode = statuses.some((s) => s.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK';
    if (req.domain === 'bare') {
      return { overallCode, statuses: statuses.map(({ code }) => ({ code, limitRemaining: 0 })) };
    }
    if (req.domain === 'short') return { overallCode: 'OK', statuses: [] }; // a broken handler
    if (req.domain === 'full') {
      return {
        overallCode,
        statuses,
        responseHeadersToAdd: [{ key: 'x-ratelimit-limit', value: '100' }],
        requestHeadersToAdd: [
          { key: 'x-domain', value: req.domain },
          { key: 'x-empty', value: '' },
        ],
        rawBody: new TextEncoder().encode('slow down'),
        dynamicMetadata: { hits: req.hitsAddend, nested: { list: [1, 'two', null, true] } },
      };
    }
    return { overallCode, statuses };
  }

  async check(req: NativeCheckRequest, context: CallContext): Promise<NativeCheckResponse> {
    this.checkSeen.push(req);
    const keys = req.entries.map((e) => e.key);
    await this.steer(keys, context);
    const cost = req.cost ?? 1;
    const policies = req.policies ?? ['default'];
    const status = keys.includes('deny')
      ? ('OVER_LIMIT' as const)
      : keys.includes('down')
        ? ('UNAVAILABLE' as const)
        : keys.includes('invalid')
          ? ('INVALID_POLICY' as const)
          : ('OK' as const);
    const allowed = status === 'OK';
    const decision = {
      status,
      allowed,
      limit: 10,
      remaining: allowed ? 10 - cost + 0.25 : 0,
      retryAfterMs: status === 'OVER_LIMIT' ? 1500.2 : 0,
      resetAfterMs: 59_999.1,
    };
    return {
      ...decision,
      ...(keys.includes('nobody') ? {} : { policy: policies[0]! }),
      ...(keys.includes('delay') ? { delayMs: 12.5 } : {}),
      decisions: policies.map((policy, i) => ({
        ...decision,
        policy,
        path: i === 0 ? ('store' as const) : ('shadow' as const),
      })),
    };
  }

  rlconfig(): string {
    return RLCONFIG;
  }
}

interface Started {
  readonly server: HttpServer;
  readonly handlers: Handlers;
  readonly base: string;
  readonly errors: unknown[];
}

async function start(options: HttpServerOptions = {}): Promise<Started> {
  const handlers = new Handlers();
  const errors: unknown[] = [];
  const server = new HttpServer(handlers, { onError: (e) => errors.push(e), ...options });
  const port = await server.listen('127.0.0.1', 0);
  return { server, handlers, base: `http://127.0.0.1:${port}`, errors };
}

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
}

const BAD = 'SLUICE_ERR_PROTOCOL_BAD_REQUEST';

/** Resolves once a new TCP connection to `port` is refused (polling, since close is async). */
async function refused(port: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    const result = await new Promise<'refused' | 'connected'>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.once('error', () => resolve('refused'));
    });
    if (result === 'refused') return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

describe('HttpServer', () => {
  let s: Started;
  const metrics = new ServiceMetrics();

  beforeAll(async () => {
    s = await start({ metrics, maxBodyBytes: 4096 });
  });
  afterAll(async () => {
    await s.server.shutdown(1000);
  });

  describe('POST /json (envoyproxy/ratelimit JSON gateway)', () => {
    it('answers OK as protojson writes a RateLimitResponse, leaving out default values', async () => {
      // upstream's own example leaves out the entry's value.
      const res = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'perday' }] }],
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.text()).toBe(
        JSON.stringify({
          overallCode: 'OK',
          statuses: [
            {
              code: 'OK',
              currentLimit: { name: 'perday=', requestsPerUnit: 100, unit: 'MINUTE' },
              limitRemaining: 99,
              durationUntilReset: '1.500250s',
            },
          ],
        }),
      );
      expect(s.handlers.rlsSeen.at(-1)).toEqual({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'perday', value: '' }] }],
        hitsAddend: 1,
      });
    });

    it('answers 429 with the over-limit shape when any descriptor is over limit', async () => {
      const res = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [
          { entries: [{ key: 'deny', value: 'x' }], limit: { requestsPerUnit: 1, unit: 'MINUTE' } },
          { entries: [{ key: 'tenant', value: 'acme' }], hitsAddend: 0 },
        ],
        hitsAddend: 5,
      });
      expect(res.status).toBe(429);
      expect(await res.json()).toEqual({
        overallCode: 'OVER_LIMIT',
        statuses: [
          {
            code: 'OVER_LIMIT',
            currentLimit: { name: 'deny=x', requestsPerUnit: 1, unit: 'MINUTE' },
            durationUntilReset: '59s',
          },
          {
            code: 'OK',
            currentLimit: { name: 'tenant=acme', requestsPerUnit: 100, unit: 'MINUTE' },
            limitRemaining: 100,
            durationUntilReset: '1.500250s',
          },
        ],
      });
      expect(s.handlers.rlsSeen.at(-1)).toEqual({
        domain: 'edge',
        descriptors: [
          { entries: [{ key: 'deny', value: 'x' }], limit: { requestsPerUnit: 1, unit: 'MINUTE' } },
          { entries: [{ key: 'tenant', value: 'acme' }], hitsAddend: 0 },
        ],
        hitsAddend: 5,
      });
    });

    it('writes headers, raw body (base64) and dynamic metadata, and drops empty strings', async () => {
      const res = await post(s.base, '/json', {
        domain: 'full',
        descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
        hitsAddend: 2,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        overallCode: 'OK',
        statuses: [
          {
            code: 'OK',
            currentLimit: { name: 'k=v', requestsPerUnit: 100, unit: 'MINUTE' },
            limitRemaining: 98,
            durationUntilReset: '1.500250s',
          },
        ],
        responseHeadersToAdd: [{ key: 'x-ratelimit-limit', value: '100' }],
        requestHeadersToAdd: [{ key: 'x-domain', value: 'full' }, { key: 'x-empty' }],
        rawBody: Buffer.from('slow down').toString('base64'),
        dynamicMetadata: { hits: 2, nested: { list: [1, 'two', null, true] } },
      });
    });

    it('leaves out a status with only default values but its code', async () => {
      const res = await post(s.base, '/json', {
        domain: 'bare',
        descriptors: [
          { entries: [{ key: 'a', value: '1' }] },
          { entries: [{ key: 'deny', value: '' }] },
        ],
      });
      expect(res.status).toBe(429);
      expect(await res.text()).toBe(
        '{"overallCode":"OVER_LIMIT","statuses":[{"code":"OK"},{"code":"OVER_LIMIT"}]}',
      );
    });

    it('reads protojson spellings: .proto field names, integers as strings, units by number', async () => {
      const res = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [
          {
            entries: [{ key: 'k', value: 'v' }],
            limit: { requests_per_unit: '7', unit: 3 },
            hits_addend: '4',
          },
        ],
        hits_addend: 2,
      });
      expect(res.status).toBe(200);
      expect(s.handlers.rlsSeen.at(-1)).toEqual({
        domain: 'edge',
        descriptors: [
          {
            entries: [{ key: 'k', value: 'v' }],
            limit: { requestsPerUnit: 7, unit: 'HOUR' },
            hitsAddend: 4,
          },
        ],
        hitsAddend: 2,
      });
    });

    it('treats null as unset, as protojson does', async () => {
      const res = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'k', value: null }], limit: null, hitsAddend: null }],
        hitsAddend: null,
      });
      expect(res.status).toBe(200);
      expect(s.handlers.rlsSeen.at(-1)).toEqual({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'k', value: '' }] }],
        hitsAddend: 1,
      });
    });

    const rejected: [string, string | Uint8Array, RegExp][] = [
      ['malformed JSON', '{"domain": "edge", "descriptors": [', /not valid JSON/],
      ['an empty body', '', /not valid JSON/],
      ['invalid UTF-8', new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), /UTF-8/],
      ['a JSON array', '[]', /must be a JSON object/],
      [
        'a missing domain',
        '{"descriptors":[{"entries":[{"key":"k","value":"v"}]}]}',
        /^rate limit domain must not be empty$/,
      ],
      [
        'an empty domain',
        '{"domain":"","descriptors":[{"entries":[{"key":"k"}]}]}',
        /^rate limit domain must not be empty$/,
      ],
      [
        'a non-string domain',
        '{"domain":5,"descriptors":[{"entries":[{"key":"k"}]}]}',
        /domain must be a string/,
      ],
      [
        'no descriptors',
        '{"domain":"edge","descriptors":[]}',
        /^rate limit descriptor list must not be empty$/,
      ],
      [
        'a descriptor without entries',
        '{"domain":"edge","descriptors":[{}]}',
        /at least one entry/,
      ],
      [
        'a non-string value',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":5}]}]}',
        /descriptors\[0\]\.entries\[0\]\.value must be a string/,
      ],
      [
        'a non-string key',
        '{"domain":"edge","descriptors":[{"entries":[{"key":true}]}]}',
        /key must be a string/,
      ],
      [
        'an empty key',
        '{"domain":"edge","descriptors":[{"entries":[{"key":""}]}]}',
        /key is empty/,
      ],
      [
        'a negative hitsAddend',
        '{"domain":"edge","hitsAddend":-1,"descriptors":[{"entries":[{"key":"k"}]}]}',
        /hits_addend must be a whole number >= 0/,
      ],
      [
        'a negative descriptor hitsAddend',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k"}],"hitsAddend":"-3"}]}',
        /descriptors\[0\]\.hits_addend must be a whole number >= 0/,
      ],
      [
        'a fractional hitsAddend',
        '{"domain":"edge","hitsAddend":1.5,"descriptors":[{"entries":[{"key":"k"}]}]}',
        /hits_addend must be a whole number/,
      ],
      [
        'a hitsAddend above uint32',
        '{"domain":"edge","hitsAddend":4294967296,"descriptors":[{"entries":[{"key":"k"}]}]}',
        /at most 2\^32 - 1/,
      ],
      [
        'a descriptor hitsAddend above 2^53 - 1',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k"}],"hitsAddend":"18446744073709551615"}]}',
        /at most 2\^53 - 1/,
      ],
      [
        'an unknown field',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k"}]}],"cost":1}',
        /unknown field "cost"/,
      ],
      [
        'a field given under both names',
        '{"domain":"edge","hitsAddend":1,"hits_addend":2,"descriptors":[{"entries":[{"key":"k"}]}]}',
        /given twice/,
      ],
      [
        'an unknown unit',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k"}],"limit":{"requestsPerUnit":1,"unit":"FORTNIGHT"}}]}',
        /no value named "FORTNIGHT"/,
      ],
      [
        'a WEEK override (not in envoy.type.v3.RateLimitUnit)',
        '{"domain":"edge","descriptors":[{"entries":[{"key":"k"}],"limit":{"requestsPerUnit":1,"unit":"WEEK"}}]}',
        /unit/,
      ],
      [
        'descriptors that are not a list',
        '{"domain":"edge","descriptors":{"entries":[{"key":"k"}]}}',
        /descriptors must be a JSON array/,
      ],
      [
        'a null descriptor',
        '{"domain":"edge","descriptors":[null]}',
        /descriptors\[0\] must be a JSON object/,
      ],
    ];

    it.each(rejected)(
      'answers 400 for %s, without calling the handler',
      async (_what, body, message) => {
        const before = s.handlers.rlsSeen.length;
        const res = await post(s.base, '/json', body);
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')).toBe('application/json');
        const answer = (await res.json()) as { error: string; code: string };
        expect(answer).toEqual({ error: expect.stringMatching(message) as unknown, code: BAD });
        expect(s.handlers.rlsSeen.length).toBe(before);
      },
    );

    it('answers a thrown SluiceError with its registry status and code', async () => {
      const policy = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'fail-policy' }] }],
      });
      expect(policy.status).toBe(400);
      expect(await policy.json()).toEqual({
        error: 'unknown policy "nope"; loaded: a, b',
        code: 'SLUICE_ERR_POLICY_UNKNOWN',
      });
      const store = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'fail-store' }] }],
      });
      expect(store.status).toBe(503);
      expect(await store.json()).toEqual({
        error: 'store did not answer within 20ms',
        code: 'SLUICE_ERR_STORE_TIMEOUT',
      });
    });

    it('answers 500 "internal error" for other failures and reports them', async () => {
      const errorsBefore = s.errors.length;
      const bug = await post(s.base, '/json', {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'fail-bug' }] }],
      });
      expect(bug.status).toBe(500);
      const text = await bug.text();
      expect(JSON.parse(text)).toEqual({ error: 'internal error' });
      expect(text).not.toContain('hunter2');
      // A handler that answers with the wrong number of statuses is a bug too.
      const short = await post(s.base, '/json', {
        domain: 'short',
        descriptors: [{ entries: [{ key: 'k' }] }],
      });
      expect(short.status).toBe(500);
      expect(s.errors.slice(errorsBefore).map((e) => (e as Error).message)).toEqual([
        'secret: redis://user:hunter2@10.0.0.1',
        'handler returned 0 statuses for 1 descriptors',
      ]);
    });
  });

  describe('POST /v1/check (Sluice native)', () => {
    it('answers 200 with the NativeCheckResponse shape, times rounded up to whole ms', async () => {
      const res = await post(s.base, '/v1/check', {
        entries: [
          { key: 'tenant', value: 'acme' },
          { key: 'route', value: 'POST /transfers' },
        ],
        cost: 3,
        requestId: 'r-1',
        policies: ['per-tenant', 'per-route'],
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('retry-after')).toBeNull();
      expect(await res.text()).toBe(
        JSON.stringify({
          allowed: true,
          status: 'OK',
          retryAfterMs: 0,
          resetAfterMs: 60_000,
          remaining: 7.25,
          limit: 10,
          policy: 'per-tenant',
          decisions: [
            {
              policy: 'per-tenant',
              path: 'store',
              allowed: true,
              status: 'OK',
              retryAfterMs: 0,
              resetAfterMs: 60_000,
              remaining: 7.25,
              limit: 10,
            },
            {
              policy: 'per-route',
              path: 'shadow',
              allowed: true,
              status: 'OK',
              retryAfterMs: 0,
              resetAfterMs: 60_000,
              remaining: 7.25,
              limit: 10,
            },
          ],
        }),
      );
      expect(s.handlers.checkSeen.at(-1)).toEqual({
        entries: [
          { key: 'tenant', value: 'acme' },
          { key: 'route', value: 'POST /transfers' },
        ],
        cost: 3,
        requestId: 'r-1',
        policies: ['per-tenant', 'per-route'],
      });
    });

    it('reads a descriptor record in key order, with optional fields absent or null', async () => {
      const res = await post(s.base, '/v1/check', {
        descriptor: { tenant: 'acme', route: 'GET /' },
        cost: null,
        requestId: null,
      });
      expect(res.status).toBe(200);
      expect(s.handlers.checkSeen.at(-1)).toEqual({
        entries: [
          { key: 'tenant', value: 'acme' },
          { key: 'route', value: 'GET /' },
        ],
      });
    });

    it('answers 429 with Retry-After in whole seconds rounded up', async () => {
      const res = await post(s.base, '/v1/check', { descriptor: { deny: '1', delay: '' } });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('2'); // 1500.2 ms → 1501 ms → 2 s
      expect(await res.json()).toEqual({
        allowed: false,
        status: 'OVER_LIMIT',
        retryAfterMs: 1501,
        resetAfterMs: 60_000,
        remaining: 0,
        limit: 10,
        policy: 'default',
        delayMs: 13,
        decisions: [
          {
            policy: 'default',
            path: 'store',
            allowed: false,
            status: 'OVER_LIMIT',
            retryAfterMs: 1501,
            resetAfterMs: 60_000,
            remaining: 0,
            limit: 10,
          },
        ],
      });
    });

    it('answers 503 for UNAVAILABLE and 400 for INVALID_POLICY, and leaves out an absent policy', async () => {
      const down = await post(s.base, '/v1/check', { descriptor: { down: '1', nobody: '' } });
      expect(down.status).toBe(503);
      expect(down.headers.get('retry-after')).toBeNull();
      const body = (await down.json()) as Record<string, unknown>;
      expect(body.status).toBe('UNAVAILABLE');
      expect('policy' in body).toBe(false);
      const invalid = await post(s.base, '/v1/check', { descriptor: { invalid: '1' } });
      expect(invalid.status).toBe(400);
      expect(((await invalid.json()) as { status: string }).status).toBe('INVALID_POLICY');
    });

    it('answers thrown SluiceErrors with their registry status and code', async () => {
      const policy = await post(s.base, '/v1/check', { descriptor: { 'fail-policy': '1' } });
      expect(policy.status).toBe(400);
      expect(await policy.json()).toEqual({
        error: 'unknown policy "nope"; loaded: a, b',
        code: 'SLUICE_ERR_POLICY_UNKNOWN',
      });
      const store = await post(s.base, '/v1/check', { descriptor: { 'fail-store': '1' } });
      expect(store.status).toBe(503);
      expect(((await store.json()) as { code: string }).code).toBe('SLUICE_ERR_STORE_TIMEOUT');
      const bug = await post(s.base, '/v1/check', { descriptor: { 'fail-bug': '1' } });
      expect(bug.status).toBe(500);
      expect(await bug.json()).toEqual({ error: 'internal error' });
    });

    const rejected: [string, string, RegExp][] = [
      ['malformed JSON', '{"entries":', /not valid JSON/],
      ['no descriptor', '{"cost":1}', /descriptor is required/],
      [
        'both descriptor forms',
        '{"entries":[{"key":"a","value":"1"}],"descriptor":{"a":"1"}}',
        /not both/,
      ],
      ['an empty descriptor', '{"descriptor":{}}', /at least one entry/],
      ['a non-string value', '{"descriptor":{"tenant":5}}', /value is not a string/],
      [
        'a non-string entry value',
        '{"entries":[{"key":"tenant","value":null}]}',
        /value is not a string/,
      ],
      ['an empty key', '{"entries":[{"key":"","value":"x"}]}', /key is empty/],
      [
        'an entry with extra fields',
        '{"entries":[{"key":"a","value":"1","x":1}]}',
        /unknown field "x"/,
      ],
      ['a negative cost', '{"descriptor":{"a":"1"},"cost":-1}', /cost must be a whole number/],
      ['a fractional cost', '{"descriptor":{"a":"1"},"cost":1.5}', /cost must be a whole number/],
      ['a string cost', '{"descriptor":{"a":"1"},"cost":"1"}', /cost must be a number/],
      [
        'a non-string request id',
        '{"descriptor":{"a":"1"},"requestId":7}',
        /request_id is not a string/,
      ],
      [
        'an empty policy name',
        '{"descriptor":{"a":"1"},"policies":[""]}',
        /policies\[0\] is empty/,
      ],
      [
        'policies that are not a list',
        '{"descriptor":{"a":"1"},"policies":"p"}',
        /policies is not a list/,
      ],
      ['an unknown field', '{"descriptor":{"a":"1"},"domain":"edge"}', /unknown field "domain"/],
    ];

    it.each(rejected)(
      'answers 400 for %s, without calling the handler',
      async (_what, body, message) => {
        const before = s.handlers.checkSeen.length;
        const res = await post(s.base, '/v1/check', body);
        expect(res.status).toBe(400);
        expect(await res.json()).toEqual({
          error: expect.stringMatching(message) as unknown,
          code: BAD,
        });
        expect(s.handlers.checkSeen.length).toBe(before);
      },
    );

    it('aborts the handler signal when the client goes away', async () => {
      s.handlers.slowStarted = deferred();
      s.handlers.slowRelease = deferred();
      const client = new AbortController();
      const pending = fetch(`${s.base}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ descriptor: { slow: '1' } }),
        signal: client.signal,
      }).catch((e: unknown) => e);
      await s.handlers.slowStarted.promise;
      const context = s.handlers.contexts.at(-1)!;
      expect(context.signal.aborted).toBe(false);
      client.abort();
      await pending;
      if (!context.signal.aborted) {
        await new Promise<void>((resolve) =>
          context.signal.addEventListener('abort', () => resolve()),
        );
      }
      expect(context.signal.aborted).toBe(true);
      s.handlers.slowRelease.resolve();
    });
  });

  describe('routing and limits', () => {
    it('answers 405 with Allow for a wrong method', async () => {
      const get = await fetch(`${s.base}/json`);
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
      expect(await get.json()).toEqual({ error: '/json accepts POST, not GET', code: BAD });
      const post405 = await post(s.base, '/healthcheck', {});
      expect(post405.status).toBe(405);
      expect(post405.headers.get('allow')).toBe('GET, HEAD');
      expect(((await post405.json()) as { code: string }).code).toBe(BAD);
      const put = await fetch(`${s.base}/v1/check`, { method: 'PUT', body: '{}' });
      expect(put.status).toBe(405);
    });

    it('answers 404 for an unknown path', async () => {
      const res = await fetch(`${s.base}/nope?x=1`);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: 'no route for /nope', code: BAD });
      expect((await post(s.base, '/json/', {})).status).toBe(404);
    });

    it('answers 413 for a body over the limit, declared or streamed', async () => {
      const big = JSON.stringify({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'k', value: 'v'.repeat(5000) }] }],
      });
      const declared = await post(s.base, '/json', big);
      expect(declared.status).toBe(413);
      expect(await declared.json()).toEqual({
        error: 'the request body is larger than 4096 bytes',
        code: BAD,
      });
      const bytes = new TextEncoder().encode(big);
      const streamed = await fetch(`${s.base}/v1/check`, {
        method: 'POST',
        body: new ReadableStream({
          start(c) {
            c.enqueue(bytes.subarray(0, 3000));
            c.enqueue(bytes.subarray(3000));
            c.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      expect(streamed.status).toBe(413);
      // A body exactly at the limit is accepted.
      const padded = `{"domain":"edge","descriptors":[{"entries":[{"key":"k"}]}]}`.padEnd(
        4096,
        ' ',
      );
      expect((await post(s.base, '/json', padded)).status).toBe(200);
    });
  });

  describe('GET /healthcheck, /rlconfig, /metrics', () => {
    it('answers 200 "OK" while healthy and 500 while not', async () => {
      const ok = await fetch(`${s.base}/healthcheck`);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toBe('OK');
      s.server.setHealthy(false);
      const down = await fetch(`${s.base}/healthcheck`);
      expect(down.status).toBe(500);
      expect(await down.text()).toBe('');
      s.server.setHealthy(true);
      const head = await fetch(`${s.base}/healthcheck`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
    });

    it('serves the handler rlconfig text', async () => {
      const res = await fetch(`${s.base}/rlconfig`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await res.text()).toBe(RLCONFIG);
    });

    it('serves the Prometheus exposition, with HTTP decision durations', async () => {
      await post(s.base, '/json', { domain: 'edge', descriptors: [{ entries: [{ key: 'k' }] }] });
      metrics.recordConfigLoad('success');
      const res = await fetch(`${s.base}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      expect(text).toContain('sluice_config_load_total{result="success"} 1');
      expect(text).toMatch(
        /sluice_decision_duration_seconds_count\{transport="http",method="ShouldRateLimit"\} \d+/,
      );
      expect(text).toMatch(
        /sluice_decision_duration_seconds_count\{transport="http",method="Check"\} \d+/,
      );
    });

    it('answers 404 at /metrics without metrics', async () => {
      const bare = await start();
      try {
        const res = await fetch(`${bare.base}/metrics`);
        expect(res.status).toBe(404);
        expect(((await res.json()) as { code: string }).code).toBe(BAD);
      } finally {
        await bare.server.shutdown(1000);
      }
    });
  });
});

describe('HttpServer.shutdown', () => {
  it('turns /healthcheck to 500 at once and keeps serving during the drain delay', async () => {
    const s = await start({ drainDelayMs: 1000 });
    expect((await fetch(`${s.base}/healthcheck`)).status).toBe(200);
    const done = s.server.shutdown(1000);
    expect(s.server.healthy).toBe(false);
    const health = await fetch(`${s.base}/healthcheck`);
    expect(health.status).toBe(500);
    expect((await post(s.base, '/v1/check', { descriptor: { a: '1' } })).status).toBe(200);
    s.server.setHealthy(true); // no effect once shutting down
    expect((await fetch(`${s.base}/healthcheck`)).status).toBe(500);
    expect(await done).toEqual({ forced: false });
    expect(s.server.shutdown()).toBe(done);
  });

  it('lets an in-flight request finish while refusing new connections', async () => {
    const s = await start();
    const pending = post(s.base, '/v1/check', { descriptor: { slow: '1' } });
    await s.handlers.slowStarted.promise;
    let settled = false;
    const done = s.server.shutdown(10_000).finally(() => (settled = true));
    expect(await refused(s.server.port!)).toBe(true);
    expect(settled).toBe(false);
    s.handlers.slowRelease.resolve();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.headers.get('connection')).toBe('close');
    expect(((await res.json()) as { status: string }).status).toBe('OK');
    expect(await done).toEqual({ forced: false });
    expect(s.handlers.contexts.at(-1)!.signal.aborted).toBe(false);
  });

  it('cuts off requests still in flight after the timeout and aborts their signal', async () => {
    const s = await start();
    const pending = post(s.base, '/json', {
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'slow' }] }],
    }).then(
      (r) => r.status,
      (e: unknown) => e,
    );
    await s.handlers.slowStarted.promise;
    expect(await s.server.shutdown(100)).toEqual({ forced: true });
    expect(s.handlers.contexts.at(-1)!.signal.aborted).toBe(true);
    expect(await pending).toBeInstanceOf(Error);
    s.handlers.slowRelease.resolve();
  });

  it('refuses a second listen', async () => {
    const s = await start();
    await expect(s.server.listen('127.0.0.1', 0)).rejects.toThrow(/called once/);
    await s.server.shutdown(1000);
  });
});

describe('HttpServer.shutdown with keep-alive connections', () => {
  /** One GET /healthcheck on `agent`: the status and Connection header, or the error code. */
  const get = (agent: http.Agent, port: number): Promise<string> =>
    new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/healthcheck', agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(`${res.statusCode} connection: ${res.headers.connection}`));
      });
      req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });

  it('answers a request sent on an idle keep-alive connection as the drain begins, with Connection: close', async () => {
    const s = await start();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await get(agent, s.server.port!)).toBe('200 connection: keep-alive');
      // The connection is idle now; the client reuses it as the server starts draining.
      const done = s.server.shutdown(5_000);
      expect(await get(agent, s.server.port!)).toBe('500 connection: close');
      // The connection closed after that answer, and the listener is gone.
      expect(await get(agent, s.server.port!)).toBe('ECONNREFUSED');
      expect(await done).toEqual({ forced: false });
    } finally {
      agent.destroy();
    }
  });

  it('closes a keep-alive connection that stays idle through the drain, without waiting for the timeout', async () => {
    const s = await start();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await get(agent, s.server.port!)).toBe('200 connection: keep-alive');
      const t0 = performance.now();
      expect(await s.server.shutdown(5_000)).toEqual({ forced: false });
      expect(performance.now() - t0).toBeLessThan(4_000);
    } finally {
      agent.destroy();
    }
  });
});
