import { PolicyError, type PolicyIssue } from '../core/errors.js';
import type { QuotaBudget } from '../quota/lease.js';
import { CAP_FLAGS, type PeerCaps } from '../quota/rlqs/peer-caps.js';

/** The `sluice controller` flags that must agree with each other, as parsed. */
export interface ControllerFlags {
  readonly budget: readonly QuotaBudget[];
  readonly refreshMs: number;
  readonly leaseTtlMs?: number;
  readonly electionTtlMs?: number;
  /** The peer caps, as parsed (each a whole number of at least 1). */
  readonly caps?: PeerCaps;
}

/**
 * The shortest refresh period a controller runs: each round saves the whole state to Redis
 * before it is sent, and a round whose save takes more than δ/2 (R/4 by default) is not
 * sent, so a shorter R sends no round at all on a loaded machine.
 */
export const MIN_REFRESH_MS = 100;
/**
 * The shortest election TTL: the leader renews every third of it, and a renewal is one
 * Redis round trip plus a timer on a busy event loop.
 */
export const MIN_ELECTION_TTL_MS = 300;
/**
 * RLQS token buckets carry `tokens_per_fill` and `max_tokens` as uint32, so no lease can
 * send more than this many units per fill (1 s) or per window.
 */
export const MAX_BUCKET_TOKENS = 4_294_967_295;

/**
 * Refuses controller settings that cannot work, naming each flag at once: a refresh or
 * election TTL too short to run, a lease TTL below the refresh period or an election TTL
 * above the lease TTL (a successor would lead only after the leases ran out), a budget
 * a lease cannot carry, and peer caps that refuse honest agents (`capIssues`). Throws
 * `SLUICE_ERR_QUOTA_CONFIG_INVALID`.
 */
export function checkControllerFlags(f: ControllerFlags): void {
  const issues: PolicyIssue[] = [];
  if (f.refreshMs < MIN_REFRESH_MS)
    issues.push({
      path: '--refresh-ms',
      message: `must be at least ${MIN_REFRESH_MS} (each round is saved to Redis before it is sent), got ${f.refreshMs}`,
    });
  const leaseTtlMs = f.leaseTtlMs ?? 3 * f.refreshMs;
  if (f.leaseTtlMs !== undefined && f.leaseTtlMs < f.refreshMs)
    issues.push({
      path: '--lease-ttl-ms',
      message: `must be at least --refresh-ms (${f.refreshMs}): a lease must outlive the round that renews it, got ${f.leaseTtlMs}`,
    });
  if (f.electionTtlMs !== undefined) {
    if (f.electionTtlMs < MIN_ELECTION_TTL_MS)
      issues.push({
        path: '--election-ttl-ms',
        message: `must be at least ${MIN_ELECTION_TTL_MS} (the leader renews every third of it), got ${f.electionTtlMs}`,
      });
    else if (f.electionTtlMs >= leaseTtlMs)
      issues.push({
        path: '--election-ttl-ms',
        message: `must be below the lease TTL (${leaseTtlMs}): a successor must lead before its predecessor's leases run out, got ${f.electionTtlMs}`,
      });
  }
  // The largest lease is the whole budget: per fill of 1 s, and per window of R.
  const perFill = Math.max(1_000, f.refreshMs) / 1_000;
  for (const b of f.budget) {
    if (b.ratePerSecond * perFill > MAX_BUCKET_TOKENS)
      issues.push({
        path: '--budget',
        message: `${b.bucket}@${b.ratePerSecond}: a lease cannot carry more than ${Math.floor(MAX_BUCKET_TOKENS / perFill)} units per second (RLQS token buckets hold at most ${MAX_BUCKET_TOKENS} tokens)`,
      });
  }
  if (f.caps !== undefined) issues.push(...capIssues(f.caps, f.budget, f.refreshMs));
  if (issues.length > 0) {
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_CONFIG_INVALID',
      `invalid controller settings: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { issues },
    );
  }
}

/**
 * Caps that refuse what the controller must take: a budget's own BucketId over the pair
 * or byte caps (its agents could never report it), fewer reports per second than an
 * agent sends at the refresh period, or a per-agent bucket cap below the per-message one
 * (a message the one allows, the other refuses).
 */
function capIssues(caps: PeerCaps, budgets: readonly QuotaBudget[], refreshMs: number) {
  const issues: PolicyIssue[] = [];
  const perSecond = 1_000 / refreshMs;
  // Said only for a refresh that can run: under MIN_REFRESH_MS that flag is the problem.
  if (refreshMs >= MIN_REFRESH_MS && caps.maxReportsPerSecond < perSecond)
    issues.push({
      path: CAP_FLAGS.maxReportsPerSecond,
      message: `must be at least ${Math.ceil(perSecond)}: agents report every --refresh-ms (${refreshMs}), got ${caps.maxReportsPerSecond}`,
    });
  if (caps.maxBucketsPerAgent < caps.maxBucketsPerMessage)
    issues.push({
      path: CAP_FLAGS.maxBucketsPerAgent,
      message: `must be at least ${CAP_FLAGS.maxBucketsPerMessage} (${caps.maxBucketsPerMessage}), got ${caps.maxBucketsPerAgent}`,
    });
  for (const b of budgets) {
    const pairs = b.bucket.split(',').map((p) => p.split('='));
    if (pairs.length > caps.maxBucketPairs)
      issues.push({
        path: CAP_FLAGS.maxBucketPairs,
        message: `--budget ${b.bucket} has ${pairs.length} pairs: its agents could not report it under ${caps.maxBucketPairs}`,
      });
    for (const [k = '', v = ''] of pairs) {
      if (Buffer.byteLength(k) > caps.maxBucketKeyBytes)
        issues.push({
          path: CAP_FLAGS.maxBucketKeyBytes,
          message: `--budget ${b.bucket}: key "${k}" is ${Buffer.byteLength(k)} bytes, above ${caps.maxBucketKeyBytes}`,
        });
      if (Buffer.byteLength(v) > caps.maxBucketValueBytes)
        issues.push({
          path: CAP_FLAGS.maxBucketValueBytes,
          message: `--budget ${b.bucket}: value "${v}" is ${Buffer.byteLength(v)} bytes, above ${caps.maxBucketValueBytes}`,
        });
    }
  }
  return issues;
}
