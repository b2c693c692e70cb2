import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';
import type {
  WireCheckRequest,
  WireCheckResponse,
  WireHealthRequest,
  WireHealthResponse,
  WireRlsRequest,
  WireRlsResponse,
} from './wire.js';

/**
 * The directory holding Sluice's `.proto` files: `src/protocol/proto` when run from
 * source, `dist/protocol/proto` once built (the build copies them there).
 */
export const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), 'proto');

/** The proto files the server offers, relative to {@link PROTO_DIR}. */
export const PROTO_FILES: readonly string[] = Object.freeze([
  'envoy/service/ratelimit/v3/rls.proto',
  'sluice/v1/sluice.proto',
  'grpc/health/v1/health.proto',
]);

/**
 * How messages map to JavaScript, for the server and for clients built from the same
 * files: camelCase keys, 64-bit integers as numbers (values above 2^53 − 1 lose
 * precision, so decoders reject them), enums as their names, unset scalars and repeated
 * fields filled with defaults (absent messages stay `null`), and set oneofs named.
 * The google.protobuf well-known types come bundled with protobufjs.
 */
export const LOADER_OPTIONS: Readonly<Options> = Object.freeze({
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
});

/** `envoy.service.ratelimit.v3.RateLimitService`. */
export interface RlsServiceDefinition extends grpc.ServiceDefinition {
  readonly ShouldRateLimit: grpc.MethodDefinition<WireRlsRequest, WireRlsResponse>;
}

/** `sluice.v1.Sluice`. */
export interface SluiceServiceDefinition extends grpc.ServiceDefinition {
  readonly Check: grpc.MethodDefinition<WireCheckRequest, WireCheckResponse>;
}

/** `grpc.health.v1.Health` (Check and Watch). */
export interface HealthServiceDefinition extends grpc.ServiceDefinition {
  readonly Check: grpc.MethodDefinition<WireHealthRequest, WireHealthResponse>;
  readonly Watch: grpc.MethodDefinition<WireHealthRequest, WireHealthResponse>;
}

const definition = loadSync([...PROTO_FILES], { ...LOADER_OPTIONS });

function service<T extends grpc.ServiceDefinition>(name: string, methods: readonly string[]): T {
  const found = definition[name] as Record<string, unknown> | undefined;
  for (const m of methods) {
    if (found?.[m] === undefined) throw new Error(`${name}.${m} is missing from ${PROTO_DIR}`);
  }
  return found as unknown as T;
}

/** Fully qualified gRPC service names, as used in paths and health checks. */
export const SERVICE_NAMES = Object.freeze({
  rls: 'envoy.service.ratelimit.v3.RateLimitService',
  sluice: 'sluice.v1.Sluice',
  health: 'grpc.health.v1.Health',
} as const);

/** envoy's rate limit service, loaded once at import. */
export const RLS_SERVICE = service<RlsServiceDefinition>(SERVICE_NAMES.rls, ['ShouldRateLimit']);

/** Sluice's native check service, loaded once at import. */
export const SLUICE_SERVICE = service<SluiceServiceDefinition>(SERVICE_NAMES.sluice, ['Check']);

/** The standard gRPC health service, loaded once at import. */
export const HEALTH_SERVICE = service<HealthServiceDefinition>(SERVICE_NAMES.health, [
  'Check',
  'Watch',
]);
