import type { Decision } from '../core/decision.js';
import type { DescriptorEntry } from '../core/descriptor.js';
import type { Status } from '../core/status.js';

/** A JSON value, as carried in a `google.protobuf.Struct`. */
export type JsonValue =
  null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** envoy's per-descriptor and overall answer. `UNKNOWN` is never sent. */
export type RlsCode = 'OK' | 'OVER_LIMIT';

/** Units of `RateLimitResponse.RateLimit` (envoy's enum without `UNKNOWN`). */
export type RlsUnit = 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK' | 'MONTH' | 'YEAR';

/** Units a caller may put in a limit override (`envoy.type.v3.RateLimitUnit`: no `WEEK`). */
export type RlsOverrideUnit = Exclude<RlsUnit, 'WEEK'>;

/** A limit the caller asks to apply to one descriptor instead of the configured one. */
export interface RlsLimitOverride {
  /** A uint32; may be 0. */
  readonly requestsPerUnit: number;
  readonly unit: RlsOverrideUnit;
}

/** One descriptor of a {@link RlsRequest}, validated. */
export interface RlsDescriptor {
  /** At least one entry; keys non-empty, values possibly empty. Keys are not checked for duplicates. */
  readonly entries: readonly DescriptorEntry[];
  /** Present when the caller sent a limit override. */
  readonly limit?: RlsLimitOverride;
  /**
   * Units this descriptor adds, when the caller set them per descriptor: a safe integer
   * ≥ 0 (0 checks without consuming). When absent, use {@link RlsRequest.hitsAddend}.
   */
  readonly hitsAddend?: number;
}

/** envoy's `RateLimitRequest`, validated: what `shouldRateLimit` receives. */
export interface RlsRequest {
  /** Non-empty. */
  readonly domain: string;
  /** At least one, in request order. */
  readonly descriptors: readonly RlsDescriptor[];
  /** Request-level units per descriptor, ≥ 1: the wire's 0 (unset) becomes 1, as envoy specifies. */
  readonly hitsAddend: number;
}

/** The limit a descriptor was checked against, reported back to envoy. */
export interface RlsRateLimit {
  /** Sent as `name`; typically the policy name. @default '' */
  readonly name?: string;
  /** A uint32: a whole number from 0 to 2^32 − 1. */
  readonly requestsPerUnit: number;
  readonly unit: RlsUnit;
}

/** The answer for one descriptor. */
export interface RlsDescriptorStatus {
  readonly code: RlsCode;
  /** Absent when no limit applied to the descriptor. */
  readonly currentLimit?: RlsRateLimit;
  /** Units left; the transport floors fractions and clamps to 0 … 2^32 − 1. */
  readonly limitRemaining: number;
  /**
   * Milliseconds until the limit resets (≥ 0, fractions allowed); sent as a
   * `google.protobuf.Duration` to the nearest nanosecond. Absent: not sent.
   */
  readonly durationUntilResetMs?: number;
}

/** One header envoy adds (`envoy.config.core.v3.HeaderValue`). */
export interface RlsHeader {
  readonly key: string;
  readonly value: string;
}

/** What `shouldRateLimit` answers; encoded as envoy's `RateLimitResponse`. */
export interface RlsResponse {
  readonly overallCode: RlsCode;
  /** Exactly one per request descriptor, in request order (the transport checks the count). */
  readonly statuses: readonly RlsDescriptorStatus[];
  readonly responseHeadersToAdd?: readonly RlsHeader[];
  readonly requestHeadersToAdd?: readonly RlsHeader[];
  /** Body envoy sends downstream when the overall code is not OK. */
  readonly rawBody?: Uint8Array;
  /** Emitted by envoy as dynamic metadata (sent as a `google.protobuf.Struct`). */
  readonly dynamicMetadata?: Readonly<Record<string, JsonValue>>;
}

/** Sluice's `CheckRequest`, validated: what `check` receives. */
export interface NativeCheckRequest {
  /** The descriptor: at least one entry, keys non-empty. Duplicate keys are the handler's to reject. */
  readonly entries: readonly DescriptorEntry[];
  /** Units to consume in every matched policy: a safe integer ≥ 0. Absent: the policies' own cost. */
  readonly cost?: number;
  /** Idempotency key; absent when the caller sent none (the wire's empty string). */
  readonly requestId?: string;
  /** Check only these policies, each name non-empty. Absent: every matching policy. */
  readonly policies?: readonly string[];
}

/**
 * What `check` answers; encoded as `sluice.v1.CheckResponse`. The top-level fields are the
 * deciding policy's (see `CheckResult` in `limiter/`); times are sent rounded up to
 * whole milliseconds, `remaining` as a double, `limit` as a whole number.
 */
export interface NativeCheckResponse {
  readonly allowed: boolean;
  readonly status: Status;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  readonly remaining: number;
  readonly limit: number;
  /** The deciding policy's name; absent when no enforced policy matched. */
  readonly policy?: string;
  /** Leaky bucket in delay mode: how long the caller must wait before proceeding. */
  readonly delayMs?: number;
  /** One per matched policy, in policy order. */
  readonly decisions: readonly Decision[];
}
