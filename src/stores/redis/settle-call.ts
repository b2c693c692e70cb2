import type { StoreError } from '../../core/errors.js';
import type { StoreSettleOptions, StoreSettleRequest, StoreSettleResult } from '../store.js';
import type { SafeConnection } from './connection.js';
import { settleMarkerKey } from './dedup.js';
import { luaParams } from './lua-args.js';
import { decodeDecisions, REFUND_REPLY_FIELDS } from './reply.js';
import { settleBatchScript, type ScriptCall } from './scripts.js';
import { perGroup, slotGroupsOf } from './slot-groups.js';

/** What a settle needs of its RedisStore. */
export interface SettleContext {
  readonly prefix: string;
  /** Whether the caller's clock decides (client-clock mode), else Redis `TIME`. */
  readonly clientClock: boolean;
  /** Whether the keys may span slots (a Cluster): one call per slot then. */
  readonly cluster: boolean;
}

/**
 * settleBatch.lua on a connection (RedisStore.settle): one atomic call per hash slot of
 * the reservation's buckets, each with its own once-only marker in that slot. A call is
 * never resent after its connection dropped; a settle repeated by the caller finds the
 * marker and changes nothing.
 */
export class SettleCall {
  readonly #connection: SafeConnection;
  readonly #script: ScriptCall;

  constructor(connection: SafeConnection) {
    this.#connection = connection;
    this.#script = settleBatchScript(connection.client);
  }

  settle(
    batch: readonly StoreSettleRequest[],
    keys: readonly string[],
    options: StoreSettleOptions,
    ctx: SettleContext,
  ): Promise<readonly StoreSettleResult[]> {
    return perGroup(slotGroupsOf(keys, ctx.cluster), batch.length, async (g) => {
      const items = g.indices.map((i) => batch[i]!);
      const out = await this.#group(
        items,
        g.indices.map((i) => keys[i]!),
        settleMarkerKey(ctx.prefix, items[0]!.key, options.requestId),
        options,
        ctx.clientClock ? String(options.nowMs) : '',
      );
      // A failed call is one failure for each of its items.
      return items.map((_, j) => out[j] ?? out[0]!);
    });
  }

  /** One script call for the items of one slot; a failure fails each of them. */
  #group(
    items: readonly StoreSettleRequest[],
    keys: readonly string[],
    markerKey: string,
    options: StoreSettleOptions,
    nowMs: string,
  ): Promise<readonly StoreSettleResult[]> {
    const args = settleArgs(items, options, nowMs);
    const fail = (error: StoreError): StoreSettleResult[] => [{ ok: false, error }];
    return this.#connection.call<readonly StoreSettleResult[], readonly StoreSettleResult[]>(
      () =>
        this.#connection.script(
          () => this.#script([...keys, markerKey], args),
          (reply): readonly StoreSettleResult[] => {
            try {
              return decodeSettle(reply, items, keys);
            } catch (error) {
              return fail(error as StoreError);
            }
          },
          fail,
          'settleBatch',
          keys[0],
        ),
      (out) => out,
      fail,
      undefined,
      keys[0],
    );
  }
}

/**
 * settleBatch.lua's ARGV: now ('' for the server's clock), the marker TTL and reservedAtMs,
 * then per item its code, estimate, actual, maxDebt, ttlMs and p1..p4 (the script's header).
 */
export function settleArgs(
  items: readonly StoreSettleRequest[],
  options: Pick<StoreSettleOptions, 'keepMs' | 'reservedAtMs'>,
  nowMs: string,
): (string | number)[] {
  const args: (string | number)[] = [
    nowMs,
    Math.max(1, Math.ceil(options.keepMs)),
    options.reservedAtMs,
  ];
  for (const r of items) {
    args.push(r.algorithm.luaCode, r.cost, r.actual, r.maxDebt, r.algorithm.ttlMs(r.params));
    args.push(...luaParams(r.algorithm.kind, r.params as Readonly<Record<string, unknown>>));
  }
  return args;
}

/** The script's reply: refundBatch's decisions, the capped units per item, the repeat flag. */
function decodeSettle(
  reply: unknown,
  items: readonly StoreSettleRequest[],
  keys: readonly string[],
): StoreSettleResult[] {
  const n = items.length;
  const fields = n * REFUND_REPLY_FIELDS;
  const all = reply as unknown[];
  const ok = Array.isArray(reply) && all.length === fields + n + 1;
  // A domain failure ({ -1, item }) and a malformed reply are decodeDecisions' to report.
  const decisions = decodeDecisions(ok ? all.slice(0, fields) : reply, items, keys);
  const repeated = all[fields + n] === 1;
  return decisions.map((decision, i) => ({
    ok: true,
    decision,
    cappedUnits: repeated ? 0 : Number(all[fields + i]),
    repeated,
  }));
}
