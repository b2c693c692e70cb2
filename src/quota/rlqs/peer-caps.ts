import { ProtocolError } from '../../core/errors.js';
import { bucketIdProblem, bucketKey } from './mapping.js';
import type { WireUsageReports } from '../../protocol/rlqs-protos.js';

/**
 * What one peer may make a controller hold or do (issue 27, "bounded by construction").
 * Each cap is a `sluice controller` flag; a stream or message that breaks one is refused
 * whole, before any of it is applied, so the work of one message is bounded by
 * `maxBucketsPerMessage` × `maxBucketPairs` × the byte caps, and its rate by
 * `maxReportsPerSecond`.
 */
export interface PeerCaps {
  /** Agents of the domain at once: streams open plus agents still in the ledger. */
  readonly maxAgents: number;
  /** Usage entries in one RLQS message. */
  readonly maxBucketsPerMessage: number;
  /** Distinct buckets one stream has reported (with or without a budget). */
  readonly maxBucketsPerAgent: number;
  /** Pairs in one BucketId. */
  readonly maxBucketPairs: number;
  /** Longest BucketId key, in UTF-8 bytes. */
  readonly maxBucketKeyBytes: number;
  /** Longest BucketId value, in UTF-8 bytes. */
  readonly maxBucketValueBytes: number;
  /** Messages one stream may send per second (a token bucket holding one second of them). */
  readonly maxReportsPerSecond: number;
}

export const DEFAULT_PEER_CAPS: PeerCaps = Object.freeze({
  maxAgents: 1_000,
  maxBucketsPerMessage: 1_000,
  maxBucketsPerAgent: 1_000,
  maxBucketPairs: 16,
  maxBucketKeyBytes: 256,
  maxBucketValueBytes: 1_024,
  maxReportsPerSecond: 10,
});

/** The `sluice controller` flag of each cap, named in refusals and settings errors. */
export const CAP_FLAGS: Readonly<Record<keyof PeerCaps, string>> = Object.freeze({
  maxAgents: '--max-agents',
  maxBucketsPerMessage: '--max-buckets-per-message',
  maxBucketsPerAgent: '--max-buckets-per-agent',
  maxBucketPairs: '--max-bucket-pairs',
  maxBucketKeyBytes: '--max-bucket-key-bytes',
  maxBucketValueBytes: '--max-bucket-value-bytes',
  maxReportsPerSecond: '--max-reports-per-second',
});

/** Refusal reasons (metric labels): one per cap, plus the malformed message. */
export type CapReason =
  | 'agents'
  | 'buckets-per-message'
  | 'buckets-per-agent'
  | 'bucket-pairs'
  | 'bucket-key-bytes'
  | 'bucket-value-bytes'
  | 'report-rate'
  | 'bad-request';

/** A refusal: its reason (counted, and the sampled log's key) and the stream's end status. */
export interface CapRefusal {
  readonly reason: CapReason;
  readonly error: ProtocolError;
}

/** Fills in the caps not given. */
export function peerCaps(given: Partial<PeerCaps> = {}): PeerCaps {
  return { ...DEFAULT_PEER_CAPS, ...given };
}

const tooMany = (reason: CapReason, cap: keyof PeerCaps, caps: PeerCaps, what: string) => ({
  reason,
  error: new ProtocolError(
    'SLUICE_ERR_QUOTA_CAP_EXCEEDED',
    `refused whole: ${what}, above the cap ${CAP_FLAGS[cap]} ${caps[cap]}`,
  ),
});
const malformed = (reason: CapReason, what: string) => ({
  reason,
  error: new ProtocolError('SLUICE_ERR_PROTOCOL_BAD_REQUEST', `refused whole: ${what}`),
});

/** A stream opening as agent number `agents + 1` of the domain, when that is over the cap. */
export function agentsRefusal(caps: PeerCaps, agents: number): CapRefusal | undefined {
  if (agents < caps.maxAgents) return undefined;
  return tooMany('agents', 'maxAgents', caps, `${agents} agents already stream or hold leases`);
}

/**
 * Checks a whole message before any of it is applied, and returns its buckets' canonical
 * texts, or the first refusal. `seen` holds the buckets the stream has already reported.
 * Cheap checks come first, so a huge message costs one comparison.
 */
export function checkMessage(
  caps: PeerCaps,
  msg: WireUsageReports,
  seen: ReadonlySet<string>,
): { readonly keys: readonly string[] } | CapRefusal {
  const usages = msg.bucketQuotaUsages;
  if (usages.length > caps.maxBucketsPerMessage)
    return tooMany(
      'buckets-per-message',
      'maxBucketsPerMessage',
      caps,
      `${usages.length} buckets in one message`,
    );
  const keys: string[] = [];
  let fresh: Set<string> | undefined;
  for (const [i, u] of usages.entries()) {
    const problem = bucketIdProblem(u.bucketId);
    if (problem !== undefined)
      return malformed('bad-request', `bucket_quota_usages[${i}]: ${problem}`);
    const pairs = Object.entries(u.bucketId!.bucket);
    if (pairs.length > caps.maxBucketPairs)
      return malformed(
        'bucket-pairs',
        `bucket_quota_usages[${i}] has ${pairs.length} pairs, above the cap ${CAP_FLAGS.maxBucketPairs} ${caps.maxBucketPairs}`,
      );
    for (const [k, v] of pairs) {
      const kb = Buffer.byteLength(k);
      if (kb > caps.maxBucketKeyBytes)
        return malformed(
          'bucket-key-bytes',
          `bucket_quota_usages[${i}] has a key of ${kb} bytes, above the cap ${CAP_FLAGS.maxBucketKeyBytes} ${caps.maxBucketKeyBytes}`,
        );
      const vb = Buffer.byteLength(v);
      if (vb > caps.maxBucketValueBytes)
        return malformed(
          'bucket-value-bytes',
          `bucket_quota_usages[${i}] has a value of ${vb} bytes, above the cap ${CAP_FLAGS.maxBucketValueBytes} ${caps.maxBucketValueBytes}`,
        );
    }
    const key = bucketKey(u.bucketId!);
    keys.push(key);
    if (!seen.has(key)) (fresh ??= new Set()).add(key);
  }
  const total = seen.size + (fresh?.size ?? 0);
  if (total > caps.maxBucketsPerAgent)
    return tooMany(
      'buckets-per-agent',
      'maxBucketsPerAgent',
      caps,
      `${total} distinct buckets on one stream`,
    );
  return { keys };
}

/**
 * One stream's report rate: a token bucket of `maxReportsPerSecond` per second holding
 * one second of them, so an agent reporting every R (and once per new bucket between)
 * never meets it.
 */
export class ReportRate {
  readonly #caps: PeerCaps;
  #tokens: number;
  #atMs: number;

  constructor(caps: PeerCaps, nowMs: number) {
    this.#caps = caps;
    this.#tokens = caps.maxReportsPerSecond;
    this.#atMs = nowMs;
  }

  /** Takes one message at `nowMs`, or returns the refusal. */
  take(nowMs: number): CapRefusal | undefined {
    const cap = this.#caps.maxReportsPerSecond;
    this.#tokens = Math.min(cap, this.#tokens + (Math.max(0, nowMs - this.#atMs) * cap) / 1_000);
    this.#atMs = nowMs;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return undefined;
    }
    return tooMany(
      'report-rate',
      'maxReportsPerSecond',
      this.#caps,
      `more than ${cap} messages in one second on one stream`,
    );
  }
}
