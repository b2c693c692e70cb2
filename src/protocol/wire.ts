/**
 * The objects @grpc/proto-loader hands to and takes from the transport, under the
 * options in `protos.ts` (camelCase keys, 64-bit integers as numbers, enums as names,
 * scalar defaults filled in, absent messages as `null`). The service's `decode.ts` and
 * `encode.ts` and the client's `sluice-client.ts` touch these; handlers see the
 * validated types in `messages.ts`.
 */

/** `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry` and `sluice.v1.DescriptorEntry`. */
export interface WireEntry {
  key: string;
  value: string;
}

/** `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`, as decoded. */
export interface WireRlsDescriptor {
  entries: WireEntry[];
  limit: { requestsPerUnit: number; unit: string | number } | null;
  /** `google.protobuf.UInt64Value`: `null` when the caller did not set it. */
  hitsAddend: { value: number } | null;
  isNegativeHits: boolean;
}

/** `envoy.service.ratelimit.v3.RateLimitRequest`, as decoded. */
export interface WireRlsRequest {
  domain: string;
  descriptors: WireRlsDescriptor[];
  hitsAddend: number;
}

/** `google.protobuf.Duration`. */
export interface WireDuration {
  seconds: number;
  nanos: number;
}

/** `google.protobuf.Value`: exactly one kind is set. */
export type WireValue =
  | { nullValue: 'NULL_VALUE' }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: WireStruct }
  | { listValue: { values: WireValue[] } };

/** `google.protobuf.Struct`. */
export interface WireStruct {
  fields: Record<string, WireValue>;
}

/** `envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus`, as encoded. */
export interface WireDescriptorStatus {
  code: string;
  currentLimit?: { name: string; requestsPerUnit: number; unit: string };
  limitRemaining: number;
  durationUntilReset?: WireDuration;
}

/** `envoy.service.ratelimit.v3.RateLimitResponse`, as encoded. */
export interface WireRlsResponse {
  overallCode: string;
  statuses: WireDescriptorStatus[];
  responseHeadersToAdd: WireEntry[];
  requestHeadersToAdd: WireEntry[];
  rawBody?: Uint8Array;
  dynamicMetadata?: WireStruct;
}

/** `sluice.v1.CheckRequest`, as decoded; `cost` is absent when the caller left it unset. */
export interface WireCheckRequest {
  entries: WireEntry[];
  cost?: number;
  requestId: string;
  policies: string[];
}

/** `sluice.v1.Decision`, as encoded. */
export interface WireDecision {
  allowed: boolean;
  status: string;
  retryAfterMs: number;
  resetAfterMs: number;
  remaining: number;
  limit: number;
  policy: string;
  path: string;
  delayMs?: number;
}

/** `sluice.v1.CheckResponse`, as encoded. */
export interface WireCheckResponse extends Omit<WireDecision, 'path'> {
  decisions: WireDecision[];
}

/** `grpc.health.v1.HealthCheckRequest`. */
export interface WireHealthRequest {
  service: string;
}

/** `grpc.health.v1.HealthCheckResponse`. */
export interface WireHealthResponse {
  status: 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
}
