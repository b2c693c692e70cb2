/**
 * Tracing end to end: the real service exports its spans over OTLP to an in-process
 * receiver built from the official OTLP protos. Each check is a span continuing the
 * caller's trace (W3C traceparent), and its store call is that span's child.
 */
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { readServiceSettings } from '../../src/service/env-settings.js';
import { startLoopbackService } from '../support/loopback-service.js';
import {
  startOtlpGrpcReceiver,
  startOtlpHttpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.js';
import { spawnServe, stopServe } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';
import { connect } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures/statsd/stats.yaml');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${CALLER_SPAN}-01`;

/** The check span and the store span of one traced call, checked for their relation. */
function expectCheckWithStoreChild(
  spans: readonly ReceivedSpan[],
  checkName: string,
  storeName: string,
): void {
  const check = spans.find((s) => s.name === checkName);
  const store = spans.find((s) => s.name === storeName);
  expect(check, `a ${checkName} span among ${spans.map((s) => s.name).join(', ')}`).toBeDefined();
  expect(store, `a ${storeName} span`).toBeDefined();
  // The check continues the caller's trace; the store call is the check's child.
  expect(check).toMatchObject({ traceId: TRACE_ID, parentSpanId: CALLER_SPAN });
  expect(store).toMatchObject({ traceId: TRACE_ID, parentSpanId: check!.spanId });
  expect(store!.attributes['pipeline length']).toBe('1');
}

describe('tracing (TRACING_ENABLED)', () => {
  it('OTLP/HTTP: a span per ShouldRateLimit, its store call a child, the caller trace continued', async () => {
    const receiver = await startOtlpHttpReceiver();
    cleanup.push(() => receiver.close());
    const svc = await startLoopbackService({
      envoyConfig: config,
      tracing: {
        protocol: 'http',
        endpoint: `http://127.0.0.1:${receiver.port}`,
        serviceName: 'sluice-test',
        serviceNamespace: 'rl',
        serviceInstanceId: 'i-1',
        samplingRate: 1,
      },
    });
    let stopped = false;
    cleanup.push(() => (stopped ? undefined : svc.shutdown()));
    const clients = connect(svc.grpcPort);
    cleanup.push(() => clients.close());
    const metadata = new grpc.Metadata();
    metadata.set('traceparent', TRACEPARENT);
    await new Promise((resolve, reject) =>
      (clients.rls as unknown as Record<string, (...a: unknown[]) => void>)[
        'ShouldRateLimit'
      ]!.call(
        clients.rls,
        { domain: 'stats', descriptors: [{ entries: [{ key: 'tenant', value: 'acme' }] }] },
        metadata,
        (e: Error | null, r: unknown) => (e === null ? resolve(r) : reject(e)),
      ),
    );
    // Shutdown flushes the batch.
    await svc.shutdown();
    stopped = true;
    expectCheckWithStoreChild(
      receiver.spans,
      'ShouldRateLimit Execution',
      'Memory Store Execution',
    );
    const check = receiver.spans.find((s) => s.name === 'ShouldRateLimit Execution')!;
    expect(check.attributes['domain']).toBe('stats');
    expect(check.resource).toMatchObject({
      'service.name': 'sluice-test',
      'service.namespace': 'rl',
      'service.instance.id': 'i-1',
    });
  });

  it('sluice serve with TRACING_EXPORTER_PROTOCOL=grpc and OTEL_EXPORTER_OTLP_ENDPOINT: the /json check and its store call', async () => {
    const receiver = await startOtlpGrpcReceiver();
    cleanup.push(() => receiver.close());
    const serve = await spawnServe(['--config', config], {
      TRACING_ENABLED: 'true',
      TRACING_EXPORTER_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`,
      TRACING_SERVICE_NAME: 'sluice-cli',
    });
    cleanup.push(() => stopServe(serve));
    const r = await fetch(`http://127.0.0.1:${serve.httpPort}/json`, {
      method: 'POST',
      headers: { traceparent: TRACEPARENT },
      body: JSON.stringify({
        domain: 'stats',
        descriptors: [{ entries: [{ key: 'tenant', value: 'acme' }] }],
      }),
    });
    expect(r.status).toBe(200);
    await waitFor(() => (receiver.spans.length >= 2 ? true : undefined), {
      what: 'two spans at the OTLP/gRPC receiver',
      timeoutMs: 10_000,
    });
    expectCheckWithStoreChild(
      receiver.spans,
      'ShouldRateLimit Execution',
      'Memory Store Execution',
    );
    expect(receiver.spans[0]!.resource['service.name']).toBe('sluice-cli');
    expect(receiver.spans[0]!.resource['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("settings: upstream's defaults, the OTLP endpoint per protocol", () => {
    expect(readServiceSettings({}).tracing).toBeUndefined();
    expect(readServiceSettings({ TRACING_ENABLED: 'true' }).tracing).toEqual({
      protocol: 'http',
      endpoint: 'http://localhost:4318',
      serviceName: 'RateLimit',
      serviceNamespace: '',
      serviceInstanceId: '',
      samplingRate: 1,
    });
    expect(
      readServiceSettings({
        TRACING_ENABLED: '1',
        TRACING_EXPORTER_PROTOCOL: 'grpc',
        TRACING_SAMPLING_RATE: '0.25',
      }).tracing,
    ).toMatchObject({ protocol: 'grpc', endpoint: 'http://localhost:4317', samplingRate: 0.25 });
  });
});
