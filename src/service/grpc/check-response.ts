import type { CheckResult } from '../../limiter/check-result.js';
import type { NativeCheckResponse } from '../../protocol/messages.js';

/**
 * The {@link NativeCheckResponse} for a limiter `CheckResult`: the top-level fields are
 * the deciding decision's (zeros and no `policy` when no enforced policy matched), with
 * the result's own `allowed`, `status` and `retryAfterMs`.
 */
export function toNativeCheckResponse(result: CheckResult): NativeCheckResponse {
  const d = result.decision;
  const base = {
    allowed: result.allowed,
    status: result.status,
    retryAfterMs: result.retryAfterMs,
    resetAfterMs: d?.resetAfterMs ?? 0,
    remaining: d?.remaining ?? 0,
    limit: d?.limit ?? 0,
    decisions: result.decisions,
  };
  if (d === undefined) return base;
  return d.delayMs === undefined
    ? { ...base, policy: d.policy }
    : { ...base, policy: d.policy, delayMs: d.delayMs };
}
