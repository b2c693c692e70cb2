import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { loadSync, type MessageTypeDefinition } from '@grpc/proto-loader';
import { LOADER_OPTIONS, PROTO_DIR } from '../../protocol/protos.js';

/**
 * The official envoy, xds and ratelimit protos (`proto/upstream`, see its README), an
 * include root of their own: envoy's full `core/v3/base.proto` there must not meet
 * Sluice's minimal one.
 */
export const XDS_PROTO_DIR = join(PROTO_DIR, 'upstream');

/** The resource type the service subscribes to, as upstream's `resource.RateLimitConfigType`. */
export const RATE_LIMIT_CONFIG_TYPE_URL =
  'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';

/**
 * `google.protobuf.Any`, as decoded: protobufjs's own wrapper for Any keeps the proto
 * name `type_url` whatever the loader's `keepCase` says.
 */
export interface WireAny {
  type_url: string;
  value: Buffer;
}

/** `google.rpc.Status`: how a NACK says what was wrong. */
export interface WireRpcStatus {
  code: number;
  message: string;
}

/** The fields of `envoy.config.core.v3.Node` the service sets. */
export interface WireNode {
  id: string;
  metadata: { fields: Record<string, { stringValue: string }> };
}

/** `envoy.service.discovery.v3.DiscoveryRequest`, as the service sends it. */
export interface WireDiscoveryRequest {
  versionInfo: string;
  node: WireNode;
  resourceNames: string[];
  typeUrl: string;
  responseNonce: string;
  errorDetail: WireRpcStatus | null;
}

/** `envoy.service.discovery.v3.DiscoveryResponse`, as decoded. */
export interface WireDiscoveryResponse {
  versionInfo: string;
  resources: WireAny[];
  typeUrl: string;
  nonce: string;
}

/** `ratelimit.config.ratelimit.v3.RateLimitPolicy`, as decoded. */
export interface WireRateLimitPolicy {
  unit: string;
  requestsPerUnit: number;
  unlimited: boolean;
  name: string;
  replaces: { name: string }[];
}

/** `ratelimit.config.ratelimit.v3.RateLimitDescriptor`, as decoded. */
export interface WireRateLimitDescriptor {
  key: string;
  value: string;
  rateLimit: WireRateLimitPolicy | null;
  descriptors: WireRateLimitDescriptor[];
  shadowMode: boolean;
  detailedMetric: boolean;
  quotaMode: boolean;
  /** `google.protobuf.Struct`, `null` when unset. */
  metadata: { fields: Record<string, unknown> } | null;
}

/** `ratelimit.config.ratelimit.v3.RateLimitConfig`, as decoded. */
export interface WireRateLimitConfig {
  name: string;
  domain: string;
  descriptors: WireRateLimitDescriptor[];
}

/** `envoy.service.discovery.v3.AggregatedDiscoveryService` (the SotW method). */
export interface AdsServiceDefinition extends grpc.ServiceDefinition {
  readonly StreamAggregatedResources: grpc.MethodDefinition<
    WireDiscoveryRequest,
    WireDiscoveryResponse
  >;
}

const definition = loadSync(
  ['envoy/service/discovery/v3/ads.proto', 'ratelimit/config/ratelimit/v3/rls_conf.proto'],
  { ...LOADER_OPTIONS, includeDirs: [XDS_PROTO_DIR] },
);

/** The ADS service, loaded once at import (the test management server uses it too). */
export const ADS_SERVICE = definition[
  'envoy.service.discovery.v3.AggregatedDiscoveryService'
] as unknown as AdsServiceDefinition;

/** `RateLimitConfig`'s codec (tests encode resources with it). */
export const RATE_LIMIT_CONFIG = definition[
  'ratelimit.config.ratelimit.v3.RateLimitConfig'
] as MessageTypeDefinition<WireRateLimitConfig, WireRateLimitConfig>;
