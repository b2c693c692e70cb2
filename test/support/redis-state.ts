import type { Redis } from 'ioredis';
import { LUA_ALGORITHM_CODE } from '../../src/stores/redis/lua-args.js';

/** Algorithm codes of packed states: the scripts' own (`ALG[code]` in lua/includes/). */
export { LUA_ALGORITHM_CODE as STATE_CODE } from '../../src/stores/redis/lua-args.js';

/** Fields per packed state, by algorithm code (lua/includes/<algorithm>.lua). */
const STATE_FIELDS: Readonly<Record<number, number>> = {
  [LUA_ALGORITHM_CODE['token-bucket']]: 2,
  [LUA_ALGORITHM_CODE.gcra]: 1,
  [LUA_ALGORITHM_CODE['leaky-bucket']]: 2,
  [LUA_ALGORITHM_CODE['fixed-window']]: 2,
  [LUA_ALGORITHM_CODE['sliding-window-counter']]: 3,
};

/**
 * The fields of a packed bucket state (see lua/includes/common.lua: the algorithm's code
 * byte, then little-endian doubles), without the expiry recorded after them, or null
 * when the key is absent. Throws when the value is not a packed state of `code`.
 */
export async function readState(redis: Redis, key: string, code: number): Promise<number[] | null> {
  return unpackState(await redis.getBuffer(key), code);
}

export function unpackState(raw: Buffer | null, code: number): number[] | null {
  if (raw === null) return null;
  const fields = STATE_FIELDS[code];
  if (
    fields === undefined ||
    raw[0] !== code ||
    (raw.length !== 1 + 8 * fields && raw.length !== 1 + 8 * (fields + 1))
  )
    throw new Error(`not a packed state of algorithm ${code}: ${raw.toString('hex')}`);
  const out: number[] = [];
  for (let i = 0; i < fields; i++) out.push(raw.readDoubleLE(1 + 8 * i));
  return out;
}

/**
 * The expiry (server ms) a packed state records after its fields, or undefined when it
 * records none (a state written before the record existed).
 */
export function recordedExpiry(raw: Buffer, code: number): number | undefined {
  const fields = STATE_FIELDS[code]!;
  return raw.length === 1 + 8 * (fields + 1) ? raw.readDoubleLE(1 + 8 * fields) : undefined;
}

/** A packed state of `code` holding `numbers`, as the scripts write it. */
export function packState(code: number, ...numbers: number[]): Buffer {
  const b = Buffer.alloc(1 + 8 * numbers.length);
  b.writeUInt8(code, 0);
  numbers.forEach((x, i) => b.writeDoubleLE(x, 1 + 8 * i));
  return b;
}

/** Tokens in a token-bucket state at `key` (as last written), or undefined when absent. */
export async function tokensIn(redis: Redis, key: string): Promise<number | undefined> {
  const v = await readState(redis, key, LUA_ALGORITHM_CODE['token-bucket']);
  return v === null ? undefined : v[0];
}

/**
 * Whole units charged to the token bucket of capacity `burst` at `key` (0 when absent);
 * for buckets that refill too slowly to matter within a test.
 */
export async function charged(redis: Redis, key: string, burst: number): Promise<number> {
  return Math.round(burst - ((await tokensIn(redis, key)) ?? burst));
}
