import { algorithmOf } from '../algorithms/index.js';
import type { Decision } from '../core/decision.js';
import type { Policy } from '../core/policy.js';
import type { CheckResult } from '../limiter/check-result.js';

/**
 * The draft these headers follow: `RateLimit-Policy` and `RateLimit` as Structured Field
 * lists, one item per policy.
 */
export const RATELIMIT_HEADERS_DRAFT = 'draft-ietf-httpapi-ratelimit-headers-11';

/** Which rate-limit headers to send. */
export interface RateLimitHeaderOptions {
  /** `RateLimit-Policy` and `RateLimit` on allowed responses too. @default true */
  readonly onAllowed?: boolean;
  /** Also `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (seconds). @default false */
  readonly legacy?: boolean;
}

/** Whole seconds, rounded up: what every delay in a header is. */
export function ceilSeconds(ms: number): number {
  return Math.max(0, Math.ceil(ms / 1000));
}

/**
 * `Retry-After` in whole seconds for a denied result: its `retryAfterMs` (the longest
 * among the denying policies), rounded up, and at least 1 so that a denial never says
 * "retry now".
 */
export function retryAfterSeconds(result: Pick<CheckResult, 'retryAfterMs'>): number {
  return Math.max(1, ceilSeconds(result.retryAfterMs));
}

/** A Structured Field string (RFC 8941 §3.3.3): quoted, `"` and `\` escaped. */
function sfString(s: string): string {
  return `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * `q` and `w` of a policy: the quota and the window in whole seconds, from its algorithm's
 * `quota`. For rate-based algorithms (token bucket, GCRA, leaky bucket) the quota is the
 * sustained rate over the period, plus `sluice-burst` (the capacity, vendor-prefixed as
 * the draft asks); for window algorithms it is the limit per window. A window that is not a whole number of
 * seconds is rounded up and the quota scaled down to it (floored), so the advertised
 * rate never exceeds the policy's: 10 per 1.5 s becomes `q=13;w=2`.
 */
export function policyItem(policy: Policy): string {
  let item = policyItems.get(policy);
  if (item === undefined) {
    item = formatPolicyItem(policy);
    policyItems.set(policy, item);
  }
  return item;
}

/** Policies are frozen, so each one's item is formatted once. */
const policyItems = new WeakMap<Policy, string>();

function formatPolicyItem(policy: Policy): string {
  const { units, windowMs, burst } = algorithmOf(policy.algorithm).quota(policy.params);
  const w = Math.max(1, ceilSeconds(windowMs));
  const q = Math.floor((units * w * 1000) / windowMs + 1e-9);
  let item = `${sfString(policy.name)};q=${q};w=${w}`;
  if (burst !== undefined) item += `;sluice-burst=${burst}`;
  return item;
}

/**
 * One `RateLimit` item: `r` is the remaining capacity (floored); `t` is, for a policy
 * that denied, its own retry-after and otherwise the time until its bucket is full
 * again, both in whole seconds rounded up.
 */
function limitItem(d: Decision): string {
  const r = Math.max(0, Math.floor(d.remaining + 1e-9));
  const t = ceilSeconds(d.allowed ? d.resetAfterMs : d.retryAfterMs);
  return `${sfString(d.policy)};r=${r};t=${t}`;
}

/**
 * The paths whose decisions describe the policy's own budget: the store's, a stale
 * budget's, and the stages that answer for the global bucket (a remembered store denial,
 * a reserved batch: what the store and the reserve hold together) or for this instance's
 * lease of it. Shadow policies are not enforced, a fail-open or fail-closed decision
 * knows nothing about the bucket, and the local bucket is a coarse per-process guard
 * whose numbers are not the policy's, so none of those is shown.
 */
const ADVERTISED_PATHS: ReadonlySet<Decision['path']> = new Set([
  'store',
  'stale',
  'cache',
  'batch',
  'lease',
]);

function advertised(result: CheckResult): Decision[] {
  return result.decisions.filter((d) => ADVERTISED_PATHS.has(d.path));
}

/**
 * The rate-limit headers of a response (lower-case names), from a check's result and the
 * policies in force. Empty when no advertised decision exists.
 *
 * @example
 * // one token bucket "payments-tenant", 100/s, burst 20; a transfer (5) just admitted:
 * // ratelimit-policy: "payments-tenant";q=100;w=1;sluice-burst=20
 * // ratelimit: "payments-tenant";r=15;t=1
 */
export function rateLimitHeaders(
  result: CheckResult,
  policyByName: (name: string) => Policy | undefined,
  options: RateLimitHeaderOptions = {},
): Record<string, string> {
  const decisions = advertised(result);
  if (decisions.length === 0) return {};
  const policies = decisions
    .map((d) => policyByName(d.policy))
    .filter((p): p is Policy => p !== undefined)
    .map(policyItem);
  const headers: Record<string, string> = {};
  if (policies.length > 0) headers['ratelimit-policy'] = policies.join(', ');
  headers['ratelimit'] = decisions.map(limitItem).join(', ');
  if (options.legacy === true) {
    // The deciding policy when it is advertised, else the tightest advertised one.
    const main =
      result.decision !== undefined && decisions.includes(result.decision)
        ? result.decision
        : decisions.reduce((a, b) => (b.remaining < a.remaining ? b : a));
    headers['x-ratelimit-limit'] = String(main.limit);
    headers['x-ratelimit-remaining'] = String(Math.max(0, Math.floor(main.remaining + 1e-9)));
    headers['x-ratelimit-reset'] = String(
      ceilSeconds(main.allowed ? main.resetAfterMs : main.retryAfterMs),
    );
  }
  return headers;
}
