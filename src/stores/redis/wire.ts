import type { StoreRequest } from '../store.js';
import { luaParams } from './lua-args.js';

/** One batch as applyBatches.lua takes it (see the header of lua/applyBatches.lua). */
export interface WireBatch {
  readonly items: readonly StoreRequest[];
  /** The items' full Redis keys, then the request id's dedup key when there is one. */
  readonly keys: readonly string[];
  /** The client's clock reading, or undefined to decide on the Redis server's clock. */
  readonly nowMs: number | undefined;
  /** Whether the last of `keys` is a dedup key. */
  readonly dedup: boolean;
  readonly dedupTtlMs: number;
  /** The last item is the dry run's never-fitting probe: its decision is dropped. */
  readonly dryRun?: boolean;
}

// The scripts share these (lua/includes/constants.lua; test/stores/redis/lua-constants.test.ts).
/** Batch header '<BdHd': flags, now, item count, dedup TTL. */
export const HEADER_BYTES = 1 + 8 + 2 + 8;
/** Item '<BddddddB': code, ttlMs, p1..p4 (the policy's part, cached), then cost, enforce. */
const POLICY_BYTES = 1 + 5 * 8;
export const ITEM_BYTES = POLICY_BYTES + 8 + 1;
/** Header flags: the client's clock is given; the batch has a request id. */
export const FLAG_CLIENT_CLOCK = 1;
export const FLAG_DEDUP = 2;
/** Reply tags: the batch's decisions; the 1-based item whose key is not Sluice state. */
export const TAG_DECISIONS = 0;
export const TAG_NOT_SLUICE_STATE = 1;
/** The most requests one batch can carry (the header's count is 16 bits). */
export const MAX_BATCH_ITEMS = 0xffff;

/**
 * The part of an item that depends on the policy only (algorithm code, TTL and the four
 * params), packed once per params object: per check only the cost and enforce are written.
 */
const policyParts = new WeakMap<object, Buffer>();

function policyPart(r: StoreRequest): Buffer {
  const params = r.params as Readonly<Record<string, unknown>>;
  let part = policyParts.get(params);
  if (part === undefined) {
    part = Buffer.alloc(POLICY_BYTES);
    part.writeUInt8(r.algorithm.luaCode, 0);
    part.writeDoubleLE(r.algorithm.ttlMs(r.params), 1);
    luaParams(r.algorithm.kind, params).forEach((p, i) => part!.writeDoubleLE(p, 9 + 8 * i));
    policyParts.set(params, part);
  }
  return part;
}

/** The keys and the packed argument of one applyBatches call carrying `batches`, in order. */
export function encodeBatches(batches: readonly WireBatch[]): { keys: string[]; packed: Buffer } {
  let size = 0;
  // Batch sizes are bounded by MAX_BATCH_ITEMS before they are queued (RedisStore).
  for (const b of batches) size += HEADER_BYTES + b.items.length * ITEM_BYTES;
  const packed = Buffer.allocUnsafe(size);
  const keys: string[] = [];
  let at = 0;
  for (const b of batches) {
    for (const k of b.keys) keys.push(k);
    at = packed.writeUInt8(
      (b.nowMs === undefined ? 0 : FLAG_CLIENT_CLOCK) | (b.dedup ? FLAG_DEDUP : 0),
      at,
    );
    at = packed.writeDoubleLE(b.nowMs ?? 0, at);
    at = packed.writeUInt16LE(b.items.length, at);
    at = packed.writeDoubleLE(b.dedupTtlMs, at);
    for (const r of b.items) {
      at += policyPart(r).copy(packed, at);
      at = packed.writeDoubleLE(r.cost, at);
      at = packed.writeUInt8(r.enforce ? 1 : 0, at);
    }
  }
  return { keys, packed };
}

/**
 * Splits applyBatches.lua's reply into one reply per batch, in order: the batch's packed
 * decisions (a Buffer), or `[-1, item]` when the item's key holds something that is not
 * Sluice state (see reply.ts). Throws a TypeError when the reply is not `count` batches.
 */
export function splitReplies(reply: unknown, count: number): unknown[] {
  if (!Buffer.isBuffer(reply)) throw new TypeError(`applyBatches.lua answered ${typeof reply}`);
  const out: unknown[] = [];
  let at = 0;
  while (at + 5 <= reply.length) {
    const tag = reply.readUInt8(at);
    const length = reply.readUInt32LE(at + 1);
    const body = reply.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    if (body.length !== length) break;
    if (tag === TAG_DECISIONS) out.push(body);
    else if (tag === TAG_NOT_SLUICE_STATE && length === 4) out.push([-1, body.readUInt32LE(0)]);
    else throw new TypeError(`applyBatches.lua answered tag ${tag} for batch ${out.length + 1}`);
  }
  if (out.length !== count || at !== reply.length)
    throw new TypeError(
      `applyBatches.lua answered ${out.length} replies (${reply.length} bytes) for ${count} batches`,
    );
  return out;
}
