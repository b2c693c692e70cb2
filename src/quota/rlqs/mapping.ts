import type { Lease } from '../lease.js';
import type { WireBucketId, WireDuration, WireStrategy } from './protos.js';

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

/**
 * A lease as an RLQS strategy, rounded down so that a client never admits more than the
 * ledger counts. A lease under one unit per second is DENY_ALL (token_bucket needs
 * tokens_per_fill > 0); ALLOW_ALL is never sent.
 *
 * token_bucket: `fill_interval` is 1 s (Envoy reads whole seconds only) and the rate is in
 * `tokens_per_fill`; `max_tokens` is the lease's burst. requests_per_time_unit: the rate
 * per SECOND.
 */
export function leaseStrategy(lease: Lease, kind: RlqsStrategyKind): WireStrategy {
  const perSecond = Math.floor(lease.rate);
  if (perSecond < 1) return { blanketRule: 'DENY_ALL' };
  if (kind === 'requests_per_time_unit') {
    return { requestsPerTimeUnit: { requestsPerTimeUnit: perSecond, timeUnit: 'SECOND' } };
  }
  return {
    tokenBucket: {
      maxTokens: Math.max(1, Math.floor(lease.burst)),
      tokensPerFill: { value: perSecond },
      fillInterval: { seconds: 1, nanos: 0 },
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
 * An RLQS strategy as (rate per second, burst per window of `windowMs`), for an agent that
 * enforces it; `undefined` for ALLOW_ALL or a strategy it cannot bound, which a Sluice
 * agent refuses.
 */
export function strategyRate(
  s: WireStrategy | null | undefined,
  windowMs: number,
): { rate: number; burst: number } | undefined {
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
    return s.blanketRule === 'DENY_ALL' ? { rate: 0, burst: 0 } : undefined;
  }
  if (which === 'tokenBucket' && 'tokenBucket' in s && s.tokenBucket) {
    const t = s.tokenBucket;
    const fillMs = durationMs(t.fillInterval);
    if (fillMs <= 0) return undefined;
    const rate = ((t.tokensPerFill?.value ?? 1) * 1000) / fillMs;
    return { rate, burst: Math.min(t.maxTokens, (rate * windowMs) / 1000) };
  }
  if (which === 'requestsPerTimeUnit' && 'requestsPerTimeUnit' in s && s.requestsPerTimeUnit) {
    const unitMs = UNIT_MS[s.requestsPerTimeUnit.timeUnit];
    if (unitMs === undefined) return undefined;
    const rate = (s.requestsPerTimeUnit.requestsPerTimeUnit * 1000) / unitMs;
    return { rate, burst: (rate * windowMs) / 1000 };
  }
  return undefined;
}
