import type { Decision } from '../core/decision.js';
import type { Status } from '../core/status.js';

/** The outcome of one check over every policy that matched the request. */
export interface CheckResult {
  /** Whether the request may proceed (shadow policies never block it). */
  readonly allowed: boolean;
  /**
   * `OK`, `OVER_LIMIT` (an enforced policy denied) or `UNAVAILABLE` (the store could
   * not decide and a `closed` policy denied). Invalid input throws instead.
   */
  readonly status: Status;
  /** When denied, the longest retry-after among the denying policies; else 0. */
  readonly retryAfterMs: number;
  /**
   * The deciding policy's decision: when denied, the denying one with the longest
   * retry-after; when allowed, the enforced one with the least remaining capacity.
   * `undefined` when no enforced policy matched.
   */
  readonly decision: Decision | undefined;
  /** One decision per matched policy, in policy order. */
  readonly decisions: readonly Decision[];
}

/** Combines per-policy decisions into the overall result (see {@link CheckResult}). */
export function combineDecisions(decisions: readonly Decision[]): CheckResult {
  let unavailable: Decision | undefined;
  let denied: Decision | undefined;
  let tightest: Decision | undefined;
  for (const d of decisions) {
    if (d.path === 'shadow') continue;
    if (d.status === 'UNAVAILABLE') unavailable ??= d;
    else if (!d.allowed) {
      if (denied === undefined || d.retryAfterMs > denied.retryAfterMs) denied = d;
    } else if (tightest === undefined || d.remaining < tightest.remaining) tightest = d;
  }
  if (unavailable !== undefined) {
    return {
      allowed: false,
      status: 'UNAVAILABLE',
      retryAfterMs: 0,
      decision: unavailable,
      decisions,
    };
  }
  if (denied !== undefined) {
    return {
      allowed: false,
      status: 'OVER_LIMIT',
      retryAfterMs: denied.retryAfterMs,
      decision: denied,
      decisions,
    };
  }
  return { allowed: true, status: 'OK', retryAfterMs: 0, decision: tightest, decisions };
}
