import type { Decision } from '../../core/decision.js';
import { toWireStruct } from './struct.js';
import type {
  NativeCheckResponse,
  RlsDescriptorStatus,
  RlsResponse,
} from '../../protocol/messages.js';
import type {
  WireCheckResponse,
  WireDecision,
  WireDescriptorStatus,
  WireDuration,
  WireRlsResponse,
} from '../../protocol/wire.js';

const UINT32_MAX = 2 ** 32 - 1;
const NANOS_PER_MS = 1_000_000;
const NANOS_PER_SECOND = 1_000_000_000;

// A handler that answers with these is broken; the error surfaces as INTERNAL.
function nonNegative(v: number, field: string): number {
  if (!Number.isFinite(v) || v < 0) {
    throw new TypeError(`handler returned ${field} = ${v}; expected a finite number >= 0`);
  }
  return v;
}

/**
 * Milliseconds as a `google.protobuf.Duration`, to the nearest nanosecond (rounding up
 * would turn float noise such as 1.1 ms → 1100000.0000000002 ns into an extra
 * nanosecond): 1500.25 → `{ seconds: 1, nanos: 500250000 }`.
 */
export function msToDuration(ms: number): WireDuration {
  const totalNanos = Math.round(nonNegative(ms, 'a duration') * NANOS_PER_MS);
  const seconds = Math.floor(totalNanos / NANOS_PER_SECOND);
  return { seconds, nanos: totalNanos - seconds * NANOS_PER_SECOND };
}

function uint32(v: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > UINT32_MAX) {
    throw new TypeError(`handler returned ${field} = ${v}; expected a uint32`);
  }
  return v;
}

function status(s: RlsDescriptorStatus, i: number): WireDescriptorStatus {
  const out: WireDescriptorStatus = {
    code: s.code,
    // uint32 on the wire: floor so remaining capacity is never overstated.
    limitRemaining: Math.min(
      UINT32_MAX,
      Math.floor(nonNegative(s.limitRemaining, 'limitRemaining')),
    ),
  };
  if (s.currentLimit !== undefined) {
    out.currentLimit = {
      name: s.currentLimit.name ?? '',
      requestsPerUnit: uint32(
        s.currentLimit.requestsPerUnit,
        `statuses[${i}].currentLimit.requestsPerUnit`,
      ),
      unit: s.currentLimit.unit,
    };
  }
  if (s.durationUntilResetMs !== undefined)
    out.durationUntilReset = msToDuration(s.durationUntilResetMs);
  return out;
}

/**
 * Encodes a handler's answer as envoy's `RateLimitResponse`. Throws `TypeError` when the
 * answer cannot be sent faithfully: not exactly `descriptorCount` statuses, a negative or
 * non-finite number, or a `requestsPerUnit` that is not a uint32.
 */
export function encodeRlsResponse(r: RlsResponse, descriptorCount: number): WireRlsResponse {
  if (r.statuses.length !== descriptorCount) {
    throw new TypeError(
      `handler returned ${r.statuses.length} statuses for ${descriptorCount} descriptors`,
    );
  }
  const out: WireRlsResponse = {
    overallCode: r.overallCode,
    statuses: r.statuses.map(status),
    responseHeadersToAdd: (r.responseHeadersToAdd ?? []).map(({ key, value }) => ({ key, value })),
    requestHeadersToAdd: (r.requestHeadersToAdd ?? []).map(({ key, value }) => ({ key, value })),
  };
  if (r.rawBody !== undefined) out.rawBody = r.rawBody;
  if (r.dynamicMetadata !== undefined) out.dynamicMetadata = toWireStruct(r.dynamicMetadata);
  return out;
}

const PATHS: Readonly<Record<Decision['path'], string>> = {
  store: 'STORE',
  'fail-open': 'FAIL_OPEN',
  'fail-closed': 'FAIL_CLOSED',
  stale: 'STALE',
  shadow: 'SHADOW',
  local: 'LOCAL',
  cache: 'CACHE',
  batch: 'BATCH',
  lease: 'LEASE',
};

type Fields = Omit<WireDecision, 'path' | 'policy'>;

// Times go out as whole ms rounded up, so a caller that waits that long is never early.
function fields(d: Omit<NativeCheckResponse, 'decisions' | 'policy'>, at: string): Fields {
  const limit = nonNegative(d.limit, `${at}limit`);
  const out: Fields = {
    allowed: d.allowed,
    status: d.status,
    retryAfterMs: Math.ceil(nonNegative(d.retryAfterMs, `${at}retryAfterMs`)),
    resetAfterMs: Math.ceil(nonNegative(d.resetAfterMs, `${at}resetAfterMs`)),
    remaining: nonNegative(d.remaining, `${at}remaining`),
    limit: Math.floor(limit),
  };
  if (d.delayMs !== undefined) out.delayMs = Math.ceil(nonNegative(d.delayMs, `${at}delayMs`));
  return out;
}

/**
 * Encodes a handler's answer as `sluice.v1.CheckResponse`: times rounded up to whole ms,
 * paths as enum names. Throws `TypeError` on a negative or non-finite number.
 */
export function encodeCheckResponse(r: NativeCheckResponse): WireCheckResponse {
  return {
    ...fields(r, ''),
    policy: r.policy ?? '',
    decisions: r.decisions.map((d, i) => ({
      ...fields(d, `decisions[${i}].`),
      policy: d.policy,
      path: PATHS[d.path],
    })),
  };
}
