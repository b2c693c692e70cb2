import { Cluster, type Redis } from 'ioredis';

/**
 * Replicated acknowledgement: after a consuming script, `WAIT replicas timeoutMs` on the
 * same connection, so the decision returns only once that many replicas have the write
 * (or the timeout passed). A failover then loses fewer acknowledged consumes, which is
 * what makes a limiter overshoot after promotion; the price is one more round trip plus
 * replication lag on every consuming call.
 *
 * `WAIT` cannot run inside a Lua script, so it is a separate command. It counts the
 * writes of the connection it is sent on, so on a Cluster it goes to the pooled
 * connection of the primary that owns the slot (the one the script was just sent on),
 * found through ioredis's slot table; after a redirect that table already names the new
 * owner.
 *
 * When fewer replicas acknowledge than asked (a replica down, lag above the timeout) or
 * the WAIT fails, the decision stands: the consume was applied on the primary and is
 * returned as decided. The shortfall is counted in {@link ReplicatedAckStats}.
 */
export interface ReplicatedAckOptions {
  /** Replicas that must acknowledge. A positive integer. */
  readonly replicas: number;
  /** Longest wait for them, in ms (Redis `WAIT` timeout; 0 would wait forever, so >= 1). */
  readonly timeoutMs: number;
}

export interface ReplicatedAckStats {
  /** WAITs sent. */
  waits: number;
  /** WAITs that returned fewer replicas than asked. */
  short: number;
  /** WAITs that failed (connection error, no known owner of the slot). */
  failed: number;
}

export function newReplicatedAckStats(): ReplicatedAckStats {
  return { waits: 0, short: 0, failed: 0 };
}

export function validateReplicatedAck(o: ReplicatedAckOptions): ReplicatedAckOptions {
  if (!Number.isSafeInteger(o.replicas) || o.replicas < 1) {
    throw new RangeError(
      `replicatedAck.replicas must be a positive integer, got ${String(o.replicas)}`,
    );
  }
  if (!Number.isSafeInteger(o.timeoutMs) || o.timeoutMs < 1) {
    throw new RangeError(
      `replicatedAck.timeoutMs must be a positive integer, got ${String(o.timeoutMs)}`,
    );
  }
  return Object.freeze({ replicas: o.replicas, timeoutMs: o.timeoutMs });
}

/** The connection that ran the last command for `slot` (the slot owner's, on a Cluster). */
function connectionFor(client: Redis | Cluster, slot: number): Redis | undefined {
  if (!(client instanceof Cluster)) return client;
  const owner = client.slots[slot]?.[0];
  if (owner === undefined) return undefined;
  return client
    .nodes('master')
    .find((n) => `${n.options.host ?? ''}:${String(n.options.port ?? '')}` === owner);
}

/** Sends WAIT after a consume on `slot`; never throws, records the outcome in `stats`. */
export async function waitForReplicas(
  client: Redis | Cluster,
  slot: number,
  options: ReplicatedAckOptions,
  stats: ReplicatedAckStats,
): Promise<void> {
  stats.waits++;
  const connection = connectionFor(client, slot);
  if (connection === undefined) {
    stats.failed++;
    return;
  }
  try {
    const acked = await connection.wait(options.replicas, options.timeoutMs);
    if (acked < options.replicas) stats.short++;
  } catch {
    stats.failed++;
  }
}
