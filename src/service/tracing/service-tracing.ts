import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Span,
  type TextMapGetter,
  type Tracer,
} from '@opentelemetry/api';
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpGrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OtlpHttpExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { B3Propagator } from '@opentelemetry/propagator-b3';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';

/** Upstream's tracing settings (`TRACING_*`, `OTEL_EXPORTER_OTLP_ENDPOINT`). */
export interface TracingOptions {
  /** OTLP over HTTP (protobuf, `<endpoint>/v1/traces`) or over gRPC. */
  readonly protocol: 'http' | 'grpc';
  /** The collector's base URL, e.g. `http://localhost:4318`. */
  readonly endpoint: string;
  readonly serviceName: string;
  readonly serviceNamespace: string;
  /** '' gives a random UUID per process, as upstream. */
  readonly serviceInstanceId: string;
  /** Share of new traces sampled, 0-1; a caller's sampled flag is followed. */
  readonly samplingRate: number;
}

/** Reads a header (gRPC metadata or HTTP) by lower-case name. */
export type HeaderReader = (name: string) => string | undefined;

const getter: TextMapGetter<HeaderReader> = {
  keys: () => [],
  get: (read, key) => read(key.toLowerCase()),
};

/**
 * One span per check (`ShouldRateLimit Execution`, `Check Execution`, as upstream names
 * the first), continuing the caller's trace (W3C trace context, B3, baggage, as
 * upstream's propagators), and one child span per store call made during it. The check
 * span is carried to the store through an AsyncLocalStorage of this instance, so
 * nothing global is registered.
 */
export class ServiceTracing {
  readonly #provider: BasicTracerProvider;
  readonly #tracer: Tracer;
  readonly #active = new AsyncLocalStorage<Span>();
  readonly #propagator = new CompositePropagator({
    propagators: [new W3CTraceContextPropagator(), new B3Propagator(), new W3CBaggagePropagator()],
  });

  constructor(options: TracingOptions) {
    const base = options.endpoint.replace(/\/+$/, '');
    const exporter =
      options.protocol === 'grpc'
        ? new OtlpGrpcExporter({ url: base })
        : new OtlpHttpExporter({ url: `${base}/v1/traces` });
    this.#provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        'service.name': options.serviceName,
        'service.namespace': options.serviceNamespace,
        'service.instance.id':
          options.serviceInstanceId === '' ? randomUUID() : options.serviceInstanceId,
      }),
      sampler: new ParentBasedSampler({
        root: new TraceIdRatioBasedSampler(options.samplingRate),
      }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1_000 })],
    });
    this.#tracer = this.#provider.getTracer('sluice');
  }

  /** Runs one check in its span; a thrown error marks the span as failed. */
  async check<T>(
    name: string,
    attributes: Readonly<Record<string, string>>,
    headers: HeaderReader | undefined,
    run: () => Promise<T>,
  ): Promise<T> {
    const parent =
      headers === undefined
        ? ROOT_CONTEXT
        : this.#propagator.extract(ROOT_CONTEXT, headers, getter);
    const span = this.#tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    try {
      return await this.#active.run(span, run);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  /** Starts a store call's span, a child of the check running now (or a root one). */
  storeSpan(name: string, attributes: Readonly<Record<string, number | string>>): Span {
    const parent = this.#active.getStore();
    const context = parent === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, parent);
    return this.#tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, context);
  }

  /** Sends the spans still buffered and stops. */
  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }
}
