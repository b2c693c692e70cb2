import type { StoreError } from '../../core/errors.js';
import type { StoreRequest } from '../store.js';
import type { SafeConnection } from './connection.js';
import type { GroupOutcome } from './cross-slot.js';
import { luaParams } from './lua-args.js';
import { failed } from './redis-errors.js';
import { decodeDecisions } from './reply.js';
import { refundBatchScript, type ScriptCall } from './scripts.js';

/** refundBatch.lua on a connection: gives back what a cross-slot batch's slot consumed. */
export class RefundCall {
  readonly #connection: SafeConnection;
  readonly #script: ScriptCall;

  constructor(connection: SafeConnection) {
    this.#connection = connection;
    this.#script = refundBatchScript(connection.client);
  }

  /**
   * Gives back `items` (their full keys in `keys`, all in one slot) consumed at
   * `decidedAtMs`. `nowMs` is the client clock's time ('' for the server's); `markerKey`,
   * when given, makes the refund happen once per request id.
   */
  refund(
    items: readonly StoreRequest[],
    keys: readonly string[],
    markerKey: string | undefined,
    decidedAtMs: number,
    nowMs: string,
    dedupTtlMs: number,
  ): Promise<GroupOutcome> {
    const args = refundArgs(items, decidedAtMs, nowMs, dedupTtlMs);
    const scriptKeys = markerKey === undefined ? keys : [...keys, markerKey];
    // Refunds run even after the caller's deadline: the consumption must not stay.
    return this.#connection.call(
      () =>
        this.#connection.script(
          () => this.#script(scriptKeys, args),
          (reply): GroupOutcome => {
            try {
              return { ok: true, decisions: decodeDecisions(reply, items, keys), decidedAtMs };
            } catch (error) {
              return { ok: false, error: error as StoreError };
            }
          },
          failed,
          'refundBatch',
          keys[0],
        ),
      (outcome) => outcome,
      failed,
      undefined,
      keys[0],
    );
  }
}

/**
 * refundBatch.lua's ARGV: now ('' for the server's clock) and the marker TTL, then per item
 * its code, cost, ttlMs, consumedAtMs and p1..p4 (see the script's header).
 */
export function refundArgs(
  items: readonly StoreRequest[],
  decidedAtMs: number,
  nowMs: string,
  dedupTtlMs: number,
): (string | number)[] {
  const args: (string | number)[] = [nowMs, dedupTtlMs];
  for (const r of items) {
    args.push(r.algorithm.luaCode, r.cost, r.algorithm.ttlMs(r.params), decidedAtMs);
    args.push(...luaParams(r.algorithm.kind, r.params as Readonly<Record<string, unknown>>));
  }
  return args;
}
