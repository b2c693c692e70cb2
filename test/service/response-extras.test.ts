/**
 * Upstream's optional answer parts, end to end over real gRPC and `/json`:
 * `LIMIT_RESPONSE_HEADERS_ENABLED` (limit / remaining / reset headers of the descriptor
 * closest to its limit) and `RESPONSE_DYNAMIC_METADATA` (the request and the passed
 * rules' metadata, returned to envoy).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService, ServeOptions } from '../../src/service/main.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { call, connect, type Clients } from './grpc/client.js';

const fixtures = join(import.meta.dirname, 'fixtures/compat');

interface WireValue {
  kind: string;
  stringValue?: string;
  numberValue?: number;
  boolValue?: boolean;
  structValue?: { fields: Record<string, WireValue> };
  listValue?: { values: WireValue[] };
}

/** A google.protobuf.Struct as @grpc/proto-loader decodes it, back to plain JSON. */
function plain(v: WireValue): unknown {
  switch (v.kind) {
    case 'structValue':
      return fromStruct(v.structValue!);
    case 'listValue':
      return v.listValue!.values.map(plain);
    case 'nullValue':
      return null;
    default:
      return v[v.kind as 'stringValue' | 'numberValue' | 'boolValue'];
  }
}
function fromStruct(s: { fields: Record<string, WireValue> }): unknown {
  return Object.fromEntries(Object.entries(s.fields).map(([k, v]) => [k, plain(v)]));
}

interface Answer {
  overallCode: string;
  responseHeadersToAdd: { key: string; value: string }[];
  dynamicMetadata: { fields: Record<string, WireValue> } | null;
}

const request = (tenant: string, hitsAddend?: number) => ({
  domain: 'compat-headers',
  descriptors: [
    {
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'plan', value: 'p' },
      ],
    },
    {
      entries: [
        { key: 'tenant', value: tenant },
        { key: 'region', value: 'eu' },
      ],
    },
  ],
  ...(hitsAddend === undefined ? {} : { hitsAddend }),
});

/** A service on the fixtures with the clock standing still, torn down after the suite. */
function serve(extra: Partial<ServeOptions>): {
  svc: () => RunningService;
  clients: () => Clients;
} {
  let svc: RunningService;
  let clients: Clients;
  beforeAll(async () => {
    svc = await startLoopbackService({ envoyConfig: fixtures, clock: stillClock(), ...extra });
    clients = connect(svc.grpcPort);
  });
  afterAll(async () => {
    clients?.close();
    await svc?.shutdown();
  });
  return { svc: () => svc, clients: () => clients };
}

describe('response headers and dynamic metadata (enabled)', () => {
  const running = serve({
    responseHeaders: { limit: 'RateLimit-Limit', remaining: 'X-Left', reset: 'RateLimit-Reset' },
    responseDynamicMetadata: true,
  });

  it('gRPC: headers of the descriptor with the least remaining, and the metadata', async () => {
    const r = await call<Answer>(running.clients().rls, 'ShouldRateLimit', request('hdr-1'));
    expect(r.overallCode).toBe('OK');
    // plan: 10/minute → 9 left; region: 3/hour → 2 left, so region's figures go out
    expect(r.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '3' },
      { key: 'X-Left', value: '2' },
      { key: 'RateLimit-Reset', value: '2800' },
    ]);
    expect(fromStruct(r.dynamicMetadata!)).toEqual({
      domain: 'compat-headers',
      descriptors: [
        { entries: ['tenant=hdr-1', 'plan=p'] },
        { entries: ['tenant=hdr-1', 'region=eu'] },
      ],
      // merged in request order: the first value of a key stays, objects merge
      metadata: { tier: { name: 'gold', weight: 1, region: 'eu' }, owner: 'edge' },
    });
  });

  it('an over-limit descriptor gives the headers and loses its metadata', async () => {
    await call<Answer>(running.clients().rls, 'ShouldRateLimit', request('hdr-2', 3));
    // region's 3/hour is used up; plan still has 7
    const r = await call<Answer>(running.clients().rls, 'ShouldRateLimit', request('hdr-2'));
    expect(r.overallCode).toBe('OVER_LIMIT');
    expect(r.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '3' },
      { key: 'X-Left', value: '0' },
      { key: 'RateLimit-Reset', value: '2800' },
    ]);
    expect(fromStruct(r.dynamicMetadata!)).toMatchObject({
      metadata: { tier: { name: 'gold', weight: 1 } },
    });
    expect(fromStruct(r.dynamicMetadata!)).not.toHaveProperty('metadata.owner');
  });

  it('/json carries the same headers and metadata in protojson form', async () => {
    const res = await fetch(`http://127.0.0.1:${running.svc().httpPort}/json`, {
      method: 'POST',
      body: JSON.stringify(request('hdr-3', 2)),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body['responseHeadersToAdd']).toEqual([
      { key: 'RateLimit-Limit', value: '3' },
      { key: 'X-Left', value: '1' },
      { key: 'RateLimit-Reset', value: '2800' },
    ]);
    expect(body['dynamicMetadata']).toEqual({
      domain: 'compat-headers',
      descriptors: [
        { entries: ['tenant=hdr-3', 'plan=p'] },
        { entries: ['tenant=hdr-3', 'region=eu'] },
      ],
      hitsAddend: 2,
      metadata: { tier: { name: 'gold', weight: 1, region: 'eu' }, owner: 'edge' },
    });
  });

  it('no header when no descriptor had a limit', async () => {
    const r = await call<Answer>(running.clients().rls, 'ShouldRateLimit', {
      domain: 'compat-headers',
      descriptors: [{ entries: [{ key: 'nothing', value: 'here' }] }],
    });
    expect(r.responseHeadersToAdd).toEqual([]);
    expect(fromStruct(r.dynamicMetadata!)).toEqual({
      domain: 'compat-headers',
      descriptors: [{ entries: ['nothing=here'] }],
    });
  });
});

describe('response headers and dynamic metadata (default: off)', () => {
  const running = serve({});

  it('adds neither', async () => {
    const r = await call<Answer>(running.clients().rls, 'ShouldRateLimit', request('off-1'));
    expect(r.overallCode).toBe('OK');
    expect(r.responseHeadersToAdd).toEqual([]);
    expect(r.dynamicMetadata).toBeNull();
  });
});
