/**
 * In-process OTLP trace receivers for tests, from the official OTLP protos in
 * test/support/otlp-proto: OTLP/HTTP (protobuf POSTs to /v1/traces) and OTLP/gRPC
 * (`opentelemetry.proto.collector.trace.v1.TraceService/Export`). Both collect the spans.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';

const definition = loadSync(['opentelemetry/proto/collector/trace/v1/trace_service.proto'], {
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [join(import.meta.dirname, 'otlp-proto')],
});
const REQUEST = definition[
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest'
] as MessageTypeDefinition<ExportRequest, ExportRequest>;
const RESPONSE = definition[
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse'
] as MessageTypeDefinition<object, object>;

interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string };
}

interface ExportRequest {
  resourceSpans: {
    resource: { attributes: KeyValue[] } | null;
    scopeSpans: {
      spans: {
        traceId: Buffer;
        spanId: Buffer;
        parentSpanId: Buffer;
        name: string;
        attributes: KeyValue[];
      }[];
    }[];
  }[];
}

/** One span received, ids in hex, attributes (and its resource's) as text. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly resource: Readonly<Record<string, string>>;
}

const text = (kvs: readonly KeyValue[]): Record<string, string> =>
  Object.fromEntries(kvs.map((kv) => [kv.key, kv.value.stringValue ?? kv.value.intValue ?? '']));

function collect(into: ReceivedSpan[], request: ExportRequest): void {
  for (const rs of request.resourceSpans) {
    const resource = text(rs.resource?.attributes ?? []);
    for (const ss of rs.scopeSpans) {
      for (const s of ss.spans) {
        into.push({
          traceId: s.traceId.toString('hex'),
          spanId: s.spanId.toString('hex'),
          parentSpanId: s.parentSpanId.toString('hex'),
          name: s.name,
          attributes: text(s.attributes),
          resource,
        });
      }
    }
  }
}

export interface OtlpReceiver {
  readonly port: number;
  readonly spans: ReceivedSpan[];
  close(): Promise<void>;
}

/** OTLP/HTTP with protobuf bodies on 127.0.0.1, any free port. */
export async function startOtlpHttpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/v1/traces' || req.headers['content-type'] !== 'application/x-protobuf') {
        res.writeHead(415).end();
        return;
      }
      collect(spans, REQUEST.deserialize(Buffer.concat(chunks)));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(RESPONSE.serialize({}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** OTLP/gRPC on 127.0.0.1, any free port. */
export async function startOtlpGrpcReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server = new grpc.Server();
  const service = definition[
    'opentelemetry.proto.collector.trace.v1.TraceService'
  ] as grpc.ServiceDefinition;
  server.addService(service, {
    Export: (
      call: grpc.ServerUnaryCall<ExportRequest, object>,
      callback: grpc.sendUnaryData<object>,
    ) => {
      collect(spans, call.request);
      callback(null, {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) =>
      e === null ? resolve(p) : reject(e),
    ),
  );
  return {
    port,
    spans,
    close: () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  };
}
