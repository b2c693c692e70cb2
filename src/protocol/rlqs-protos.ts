import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { LOADER_OPTIONS, PROTO_DIR } from './protos.js';

/**
 * The official RLQS protos (unchanged copies from envoy's api tree and its imports, with
 * their licence), under `proto/upstream`, loaded with that directory as the only include
 * root so they never meet Sluice's own trimmed RLS copies.
 */
export const RLQS_PROTO_DIR = join(PROTO_DIR, 'upstream');

export const RLQS_SERVICE_NAME = 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService';

/** `google.protobuf.Duration` as the loader hands it over (64-bit seconds as a number). */
export interface WireDuration {
  seconds: number;
  nanos: number;
}

/** `envoy.service.rate_limit_quota.v3.BucketId`. */
export interface WireBucketId {
  bucket: Record<string, string>;
}

/** `RateLimitQuotaUsageReports`. */
export interface WireUsageReports {
  domain: string;
  bucketQuotaUsages: {
    bucketId: WireBucketId | null;
    timeElapsed: WireDuration | null;
    numRequestsAllowed: number;
    numRequestsDenied: number;
  }[];
}

/** `envoy.type.v3.RateLimitStrategy` (one of the three). */
export type WireStrategy =
  | { blanketRule: 'ALLOW_ALL' | 'DENY_ALL'; strategy?: 'blanketRule' }
  | {
      requestsPerTimeUnit: { requestsPerTimeUnit: number; timeUnit: string };
      strategy?: 'requestsPerTimeUnit';
    }
  | {
      tokenBucket: {
        maxTokens: number;
        tokensPerFill: { value: number } | null;
        fillInterval: WireDuration | null;
      };
      strategy?: 'tokenBucket';
    };

/** `RateLimitQuotaResponse.BucketAction`. */
export type WireBucketAction =
  | {
      bucketId: WireBucketId;
      quotaAssignmentAction: {
        assignmentTimeToLive: WireDuration | null;
        rateLimitStrategy: WireStrategy | null;
      };
      bucketAction?: 'quotaAssignmentAction';
    }
  | {
      bucketId: WireBucketId;
      abandonAction: Record<string, never>;
      bucketAction?: 'abandonAction';
    };

/** `RateLimitQuotaResponse`. */
export interface WireQuotaResponse {
  bucketAction: WireBucketAction[];
}

/** `RateLimitQuotaService`. */
export interface RlqsServiceDefinition extends grpc.ServiceDefinition {
  readonly StreamRateLimitQuotas: grpc.MethodDefinition<WireUsageReports, WireQuotaResponse>;
}

const definition = loadSync(['envoy/service/rate_limit_quota/v3/rlqs.proto'], {
  ...LOADER_OPTIONS,
  includeDirs: [RLQS_PROTO_DIR],
});

/** The RLQS service, loaded once at import. */
export const RLQS_SERVICE = (() => {
  const found = definition[RLQS_SERVICE_NAME] as Record<string, unknown> | undefined;
  if (found?.['StreamRateLimitQuotas'] === undefined)
    throw new Error(`${RLQS_SERVICE_NAME} is missing from ${RLQS_PROTO_DIR}`);
  return found as unknown as RlqsServiceDefinition;
})();
