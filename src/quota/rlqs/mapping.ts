import type { Lease } from '../lease.js';
import type { WireBucketId, WireDuration, WireStrategy } from '../../protocol/rlqs-protos.js';

/**
 * Between RLQS messages and Sluice's lease shapes; pure.
 *
 * A BucketId's canonical text is its pairs sorted by key, `k=v` joined with `,`, each
 * part escaped (`\` → `\\`, `,` → `\,`, `=` → `\=`) so that distinct maps never share a
 * text: `{b: "2", a: "1"}` → `a=1,b=2`.
 */
export function bucketKey(id: WireBucketId): string {
  const esc = (s: string) => s.replace(/[\\,=]/g, (c) => `\\${c}`);
  return Object.keys(id.bucket)
    .sort()
    .map((k) => `${esc(k)}=${esc(id.bucket[k]!)}`)
    .join(',');
}

/** Why a BucketId is not usable, or `undefined` when it is. */
export function bucketIdProblem(id: WireBucketId | null | undefined): string | undefined {
  if (id === null || id === undefined) return 'bucket_id is required';
  const keys = Object.keys(id.bucket ?? {});
  if (keys.length === 0) return 'bucket_id.bucket needs at least one pair';
  for (const k of keys) {
    if (k === '' || id.bucket[k] === '')
      return 'bucket_id.bucket keys and values must be non-empty';
  }
  return undefined;
}

/** Milliseconds to a Duration. */
export function duration(ms: number): WireDuration {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** A Duration to milliseconds (0 when unset). */
export function durationMs(d: WireDuration | null | undefined): number {
  return d === null || d === undefined ? 0 : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

/** Which RLQS strategy a controller sends. */
export type RlqsStrategyKind = 'token_bucket' | 'requests_per_time_unit';

/** The longest fill interval sent, in seconds: a share smaller than 1 unit per this is DENY_ALL. */
export const MAX_FILL_SECONDS = 60;

/**
 * The whole-second fill interval and whole tokens per fill that express `rate` (units/s)
 * best without exceeding it: Envoy reads `fill_interval` in whole seconds and tokens are
 * whole. The smallest interval that keeps at least 90% of the rate wins, so a large rate
 * keeps a 1 s fill (49.75/s → 49 per 1 s) and a small one is not floored to nothing
 * (0.66/s → 3 per 5 s, not DENY_ALL). `undefined` when even
 * {@link MAX_FILL_SECONDS} holds less than one token.
 */
export function tokenFill(rate: number): { tokens: number; seconds: number } | undefined {
  let best: { tokens: number; seconds: number } | undefined;
  for (let seconds = 1; seconds <= MAX_FILL_SECONDS; seconds++) {
    // A hair of tolerance, so that 1/3 × 3 counts as 1 token.
    const tokens = Math.floor(rate * seconds + 1e-9);
    if (tokens < 1) continue;
    if (best === undefined || tokens / seconds > best.tokens / best.seconds)
      best = { tokens, seconds };
    if (tokens / seconds >= 0.9 * rate) return { tokens, seconds };
  }
  return best;
}

/**
 * A lease as an RLQS strategy, rounded down so that a client never admits more than the
 * ledger counts; ALLOW_ALL is never sent.
 *
 * token_bucket: `tokens_per_fill` every `fill_interval` (whole seconds, {@link tokenFill}),
 * so a share under 1 unit/s is still a share; `max_tokens` is the larger of the lease's
 * burst and one fill. Only a share under 1 unit per {@link MAX_FILL_SECONDS} is DENY_ALL.
 * requests_per_time_unit: the rate per SECOND, so under 1/s it is DENY_ALL.
 */
export function leaseStrategy(lease: Lease, kind: RlqsStrategyKind): WireStrategy {
  if (kind === 'requests_per_time_unit') {
    const perSecond = Math.floor(lease.rate);
    if (perSecond < 1) return { blanketRule: 'DENY_ALL' };
    return { requestsPerTimeUnit: { requestsPerTimeUnit: perSecond, timeUnit: 'SECOND' } };
  }
  const fill = tokenFill(lease.rate);
  if (fill === undefined) return { blanketRule: 'DENY_ALL' };
  return {
    tokenBucket: {
      maxTokens: Math.max(fill.tokens, Math.floor(lease.burst)),
      tokensPerFill: { value: fill.tokens },
      fillInterval: { seconds: fill.seconds, nanos: 0 },
    },
  };
}

const UNIT_MS: Record<string, number> = {
  SECOND: 1_000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
};

/**
 * An RLQS strategy as (rate per second, burst per window, window) for an agent that
 * enforces it; `undefined` for ALLOW_ALL or a strategy it cannot bound, which a Sluice
 * agent refuses. The window is `windowMs`, or a token bucket's fill interval when that is
 * longer: 2 tokens per 3 s is enforced as 2 units per 3 s window, never as 0.67 of a unit
 * per 1 s window (which admits nothing).
 */
export function strategyRate(
  s: WireStrategy | null | undefined,
  windowMs: number,
): { rate: number; burst: number; windowMs: number } | undefined {
  if (s === null || s === undefined) return undefined;
  // Decoded messages name the set member in `strategy` (the loader's `oneofs` option);
  // objects built in process are told apart by which member they hold.
  const which =
    s.strategy ??
    ('tokenBucket' in s
      ? 'tokenBucket'
      : 'requestsPerTimeUnit' in s
        ? 'requestsPerTimeUnit'
        : 'blanketRule');
  if (which === 'blanketRule' && 'blanketRule' in s) {
    return s.blanketRule === 'DENY_ALL' ? { rate: 0, burst: 0, windowMs } : undefined;
  }
  if (which === 'tokenBucket' && 'tokenBucket' in s && s.tokenBucket) {
    const t = s.tokenBucket;
    const fillMs = durationMs(t.fillInterval);
    if (fillMs <= 0) return undefined;
    const rate = ((t.tokensPerFill?.value ?? 1) * 1000) / fillMs;
    const w = Math.max(windowMs, fillMs);
    return { rate, burst: Math.min(t.maxTokens, (rate * w) / 1000), windowMs: w };
  }
  if (which === 'requestsPerTimeUnit' && 'requestsPerTimeUnit' in s && s.requestsPerTimeUnit) {
    const unitMs = UNIT_MS[s.requestsPerTimeUnit.timeUnit];
    if (unitMs === undefined) return undefined;
    const rate = (s.requestsPerTimeUnit.requestsPerTimeUnit * 1000) / unitMs;
    return { rate, burst: (rate * windowMs) / 1000, windowMs };
  }
  return undefined;
}
