import type { Redis } from 'ioredis';

/** Algorithm codes of packed states (ALG[code] in src/stores/redis/lua/includes/). */
export const STATE_CODE = {
  'token-bucket': 1,
  gcra: 2,
  'leaky-bucket': 3,
  'fixed-window': 4,
  'sliding-window-counter': 5,
} as const;

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
