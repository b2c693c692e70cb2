import { dedupKey } from '../key.js';

// A request id's records, in the slot of the bucket key they are built from: a script's
// keys must share one slot on a Cluster.

/** Redis key of the record that answers a retry of request id `rid` with its first reply. */
export function dedupRedisKey(prefix: string, bucketKey: string, rid: string): string {
  return `${prefix}:${dedupKey(bucketKey, rid)}`;
}

/** Request id of an independent call's `index`-th request: each has its own record. */
export function independentRequestId(rid: string, index: number): string {
  return `${rid}#${index}`;
}

/**
 * Redis key of the marker that makes a refund under one request id happen once, however
 * often a retry replays the batch (its consume is deduplicated; its refund must be too).
 */
export function refundMarkerKey(prefix: string, bucketKey: string, rid: string): string {
  return `${dedupRedisKey(prefix, bucketKey, rid)}:refund`;
}

/**
 * Redis key of the marker that makes a reservation's settle happen once per bucket slot,
 * however often it is repeated (`rid` is the reservation's nonce).
 */
export function settleMarkerKey(prefix: string, bucketKey: string, rid: string): string {
  return `${dedupRedisKey(prefix, bucketKey, rid)}:settle`;
}
