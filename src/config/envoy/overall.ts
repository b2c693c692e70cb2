/** A response code of envoyproxy/ratelimit's service; it never answers UNKNOWN. */
export type EnvoyCode = 'OK' | 'OVER_LIMIT';

/** `limit_remaining` of an unlimited descriptor: 2^32-1. */
export const UNLIMITED_REMAINING = 4_294_967_295;

/**
 * A descriptor's code (limiter/base_limiter.go): OVER_LIMIT when its limit was
 * exceeded, except that a `shadow_mode` rule always answers OK (its over-limit is only
 * counted). A request-supplied limit is never in shadow mode.
 */
export function descriptorCode(overLimit: boolean, shadowMode: boolean): EnvoyCode {
  return overLimit && !shadowMode ? 'OVER_LIMIT' : 'OK';
}

/** One descriptor's outcome, as the overall code needs it. */
export interface DescriptorOutcome {
  /** The descriptor's code, after its rule's shadow mode ({@link descriptorCode}). */
  readonly code: EnvoyCode;
  /** The matched rule is `unlimited`. */
  readonly unlimited: boolean;
  /** The matched rule has `quota_mode` (false when no rule applied). */
  readonly quotaMode: boolean;
  /** A current limit is reported: a rule applied, not unlimited, not replaced. */
  readonly hasLimit: boolean;
  /** `limit_remaining` (0 when over the limit). */
  readonly remaining: number;
}

/** Service-wide switches (upstream env `SHADOW_MODE`, `QUOTA_MODE`). */
export interface OverallOptions {
  /** Never answer OVER_LIMIT overall; descriptors keep their own codes. @default false */
  readonly globalShadowMode: boolean;
  /** Treat every descriptor as quota mode. @default false */
  readonly globalQuotaMode: boolean;
}

/** The request's answer. */
export interface OverallResult {
  readonly code: EnvoyCode;
  /** The answer was OVER_LIMIT and global shadow mode turned it into OK (counted upstream). */
  readonly globalShadowApplied: boolean;
  /**
   * The descriptor whose limit goes into the `RateLimit-*` response headers, or
   * `undefined` for none: the last over-limit non-quota descriptor if any, else the one
   * with the least remaining (the first among equals) among those with a limit.
   */
  readonly headerIndex: number | undefined;
}

/**
 * The overall code of a request (service/ratelimit.go, `shouldRateLimitWorker`):
 *
 * - unlimited descriptors take no part;
 * - a descriptor is a quota descriptor when its rule has `quota_mode`, or always under
 *   global quota mode (then even a descriptor that matched no rule is one, and counts
 *   as passed);
 * - OVER_LIMIT when any non-quota descriptor is OVER_LIMIT, or when there are quota
 *   descriptors and all of them are OVER_LIMIT; otherwise OK;
 * - global shadow mode then turns OVER_LIMIT into OK; per-descriptor codes stay as
 *   they are.
 */
export function overallResult(
  outcomes: readonly DescriptorOutcome[],
  options: OverallOptions = { globalShadowMode: false, globalQuotaMode: false },
): OverallResult {
  let failedRate = 0;
  let failedQuota = 0;
  let quotaTotal = 0;
  let headerIndex: number | undefined;
  let minRemaining = UNLIMITED_REMAINING;
  outcomes.forEach((o, i) => {
    if (o.hasLimit && o.remaining < minRemaining) {
      headerIndex = i;
      minRemaining = o.remaining;
    }
    if (o.unlimited) return;
    const quota = options.globalQuotaMode || o.quotaMode;
    if (o.code === 'OVER_LIMIT') {
      if (quota) failedQuota += 1;
      else {
        failedRate += 1;
        headerIndex = i;
        minRemaining = 0;
      }
    }
    if (quota) quotaTotal += 1;
  });
  const over = failedRate > 0 || (quotaTotal > 0 && quotaTotal === failedQuota);
  const globalShadowApplied = over && options.globalShadowMode;
  return {
    code: over && !globalShadowApplied ? 'OVER_LIMIT' : 'OK',
    globalShadowApplied,
    headerIndex,
  };
}
