import type { RlsDescriptorStatus, RlsHeader } from '../protocol/messages.js';

/**
 * Names of the headers upstream adds to envoy's response when
 * `LIMIT_RESPONSE_HEADERS_ENABLED` is set (`LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`,
 * `LIMIT_RESET_HEADER`).
 */
export interface ResponseHeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
}

/** Upstream's default names. */
export const DEFAULT_RESPONSE_HEADER_NAMES: ResponseHeaderNames = Object.freeze({
  limit: 'RateLimit-Limit',
  remaining: 'RateLimit-Remaining',
  reset: 'RateLimit-Reset',
});

/**
 * The three headers for the descriptor closest to its limit (see `overallResult`'s
 * `headerIndex`): its `requests_per_unit`, its `limit_remaining`, and the whole seconds
 * until its limit resets — rounded up, so a client that waits that long is never early
 * (for envoy-format fixed windows this is upstream's seconds to the end of the window).
 */
export function rateLimitResponseHeaders(
  names: ResponseHeaderNames,
  status: RlsDescriptorStatus,
): RlsHeader[] {
  if (status.currentLimit === undefined) return [];
  const resetSeconds = Math.ceil((status.durationUntilResetMs ?? 0) / 1_000);
  return [
    { key: names.limit, value: String(status.currentLimit.requestsPerUnit) },
    { key: names.remaining, value: String(Math.max(0, Math.floor(status.limitRemaining))) },
    { key: names.reset, value: String(resetSeconds) },
  ];
}
