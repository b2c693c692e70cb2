import { Cluster, type Redis } from 'ioredis';
import { StoreError } from '../../core/errors.js';
import type { StoreRequest } from '../store.js';
import type { GroupOutcome } from './cross-slot.js';

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
 * returned as decided. The shortfall is counted in {@link ReplicatedAckStats}. So WAIT
 * lowers the overshoot after a failover but does not bound it.
 *
 * With `strict`, for contractual quotas, a consume is admitted only once replicated: a
 * short or failed WAIT, or a degraded primary (no WAIT sent), turns the call's consuming
 * outcomes into `SLUICE_ERR_STORE_NOT_REPLICATED`, so the policy's failure mode decides.
 * Its units stay charged on the primary (they are not refunded: the refund could be lost
 * the same way). A failover then loses no admission a caller acted on; the price is that
 * a primary without its replicas admits nothing through the store.
 *
 * WAIT blocks its connection, and every decision for that primary shares the connection:
 * on a primary that has lost its replicas (e.g. just promoted), each WAIT would hold all
 * traffic to it for `timeoutMs`. So after a short acknowledgement the primary is
 * *degraded* for `degradedForMs`: no WAIT is sent to it (counted as `skipped`; those
 * consumes have only asynchronous replication), then WAIT is tried again.
 */
export interface ReplicatedAckOptions {
  /** Replicas that must acknowledge. A positive integer. */
  readonly replicas: number;
  /** Longest wait for them, in ms (Redis `WAIT` timeout; 0 would wait forever, so >= 1). */
  readonly timeoutMs: number;
  /** After a short acknowledgement, send no WAIT to that primary for this long (ms). @default 1000 */
  readonly degradedForMs?: number;
  /**
   * Admit a consume only once `replicas` have acknowledged it; otherwise the call fails
   * with `SLUICE_ERR_STORE_NOT_REPLICATED` (its units stay charged) and the policy's
   * failure mode decides. @default false
   */
  readonly strict?: boolean;
}

export interface ReplicatedAckStats {
  /** WAITs sent. */
  waits: number;
  /** WAITs that returned fewer replicas than asked. */
  short: number;
  /** WAITs that failed (connection error, no ready connection to the slot's owner). */
  failed: number;
  /** Consumes returned without WAIT because their primary was degraded. */
  skipped: number;
}

export function newReplicatedAckStats(): ReplicatedAckStats {
  return { waits: 0, short: 0, failed: 0, skipped: 0 };
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
  const degradedForMs = o.degradedForMs ?? 1000;
  if (!(degradedForMs >= 0)) {
    throw new RangeError(`replicatedAck.degradedForMs must be >= 0, got ${String(degradedForMs)}`);
  }
  if (o.strict !== undefined && typeof o.strict !== 'boolean') {
    throw new RangeError(`replicatedAck.strict must be a boolean, got ${String(o.strict)}`);
  }
  return Object.freeze({
    replicas: o.replicas,
    timeoutMs: o.timeoutMs,
    degradedForMs,
    strict: o.strict ?? false,
  });
}

/** The connection that ran the last command for `slot` (the slot owner's, on a Cluster). */
function connectionFor(client: Redis | Cluster, slot: number): Redis | undefined {
  if (!(client instanceof Cluster)) return client;
  const owner = client.slots[slot]?.[0];
  if (owner === undefined) return undefined;
  // Only a ready connection can be the one that just ran the script; sending on any other
  // would make ioredis (re)connect it, e.g. to a primary that has just died.
  return client
    .nodes('master')
    .find(
      (n) =>
        n.status === 'ready' && `${n.options.host ?? ''}:${String(n.options.port ?? '')}` === owner,
    );
}

/** Primaries (connections) that acknowledged short, until when (performance.now()). */
export type DegradedPrimaries = WeakMap<Redis, number>;

/**
 * Sends WAIT after a consume on `slot`; never throws, records the outcome in `stats`.
 * Resolves to why the consume is not known to be replicated, or undefined when it is.
 */
export async function waitForReplicas(
  client: Redis | Cluster,
  slot: number,
  options: ReplicatedAckOptions,
  stats: ReplicatedAckStats,
  degraded: DegradedPrimaries,
): Promise<string | undefined> {
  const connection = connectionFor(client, slot);
  if (connection === undefined) {
    stats.failed++;
    return 'no ready connection to the primary to send WAIT on';
  }
  if ((degraded.get(connection) ?? -Infinity) > performance.now()) {
    stats.skipped++;
    return 'the primary acknowledged short moments ago (degraded: no WAIT sent)';
  }
  stats.waits++;
  try {
    const acked = await connection.wait(options.replicas, options.timeoutMs);
    if (acked >= options.replicas) return undefined;
    stats.short++;
    degraded.set(connection, performance.now() + (options.degradedForMs ?? 1000));
    return `WAIT ${options.replicas} ${options.timeoutMs}: ${acked} acknowledged`;
  } catch (error) {
    stats.failed++;
    return `WAIT failed: ${(error as Error).message}`;
  }
}

/**
 * The replicated acknowledgement of one store: after a call that consumed something, WAIT
 * on the slot's primary (see waitForReplicas), counted in `stats`.
 */
export class ReplicatedAck {
  readonly stats: ReplicatedAckStats = newReplicatedAckStats();
  readonly #client: Redis | Cluster;
  readonly #options: ReplicatedAckOptions | undefined;
  readonly #degraded: DegradedPrimaries = new WeakMap();

  /** Off when `options` is undefined: nothing is ever waited for. */
  constructor(client: Redis | Cluster, options: ReplicatedAckOptions | undefined) {
    this.#client = client;
    this.#options = options;
  }

  get on(): boolean {
    return this.#options !== undefined;
  }

  /**
   * Waits for replicas when any of `outcomes` (of the batches `batches`) consumed, and
   * returns the outcomes: as they are, or, in strict mode when the consume is not known
   * to be replicated, with each consuming one failed (`SLUICE_ERR_STORE_NOT_REPLICATED`).
   */
  async after(
    batches: readonly (readonly StoreRequest[])[],
    slot: number,
    outcomes: readonly GroupOutcome[],
  ): Promise<readonly GroupOutcome[]> {
    const options = this.#options;
    if (options === undefined) return outcomes;
    const consumed = outcomes.map((o, j) => charged(batches[j]!, o));
    if (!consumed.includes(true)) return outcomes;
    const why = await waitForReplicas(this.#client, slot, options, this.stats, this.#degraded);
    if (why === undefined || options.strict !== true) return outcomes;
    const error = new StoreError(
      'SLUICE_ERR_STORE_NOT_REPLICATED',
      `Redis: a consume was applied on the primary but not acknowledged by ${options.replicas} replica${options.replicas === 1 ? '' : 's'} (${why}); strict replicatedAck does not admit it and its units stay charged`,
      { reason: 'replication' },
    );
    return outcomes.map((o, j) => (consumed[j] === true ? { ok: false as const, error } : o));
  }
}

/** Whether a batch's outcome consumed anything (see decideBatch). */
function charged(items: readonly StoreRequest[], out: GroupOutcome): boolean {
  if (!out.ok) return false;
  const chargesDenied = (r: StoreRequest): boolean =>
    r.algorithm.chargesDenied?.(r.params) === true;
  const admitted = items.every((r, j) => !r.enforce || out.decisions[j]!.allowed);
  return items.some(
    (r, j) => r.cost > 0 && (chargesDenied(r) || (admitted && out.decisions[j]!.allowed)),
  );
}
