import type { Redis } from 'ioredis';
import { LUA_ALGORITHM_CODE } from '../../src/stores/redis/lua-args.js';

/** Algorithm codes of packed states: the scripts' own (`ALG[code]` in lua/algorithms/). */
export { LUA_ALGORITHM_CODE as STATE_CODE } from '../../src/stores/redis/lua-args.js';

/**
 * The numbers of a packed bucket state (see lua/includes/common.lua: the algorithm's code
 * byte, then little-endian doubles), or null when the key is absent. Throws when the value
 * is not a packed state of `code`.
 */
export async function readState(redis: Redis, key: string, code: number): Promise<number[] | null> {
  return unpackState(await redis.getBuffer(key), code);
}

export function unpackState(raw: Buffer | null, code: number): number[] | null {
  if (raw === null) return null;
  if (raw[0] !== code || (raw.length - 1) % 8 !== 0)
    throw new Error(`not a packed state of algorithm ${code}: ${raw.toString('hex')}`);
  const out: number[] = [];
  for (let at = 1; at < raw.length; at += 8) out.push(raw.readDoubleLE(at));
  return out;
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
