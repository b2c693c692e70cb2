/**
 * What single commands cost inside a Redis script on this machine, two ways:
 *
 * 1. On one warm key: each command runs 100,000 times in a loop in one EVAL (no network,
 *    no client, no cache misses), and `INFO commandstats` gives the EVAL's time.
 * 2. On the benchmark's keys: calls of 12 keys each (what a coalesced call carries at 64
 *    concurrent checks), drawn Zipf(1.0) over 100k bucket-shaped keys that all exist, so
 *    what a decision's read and write cost where the buckets are many and mostly cold.
 *    Per key, after the same calls with an empty body.
 *
 * The floor under any per-decision Lua: a decision reads its state and writes it back with
 * an expiry. `npx tsx bench/redis-command-costs.ts` (medians of 5 and 3 runs).
 */
import type { Redis } from 'ioredis';
import { RedisServer } from '../test/support/redis-server.js';
import { keyRing } from './lib/rng.js';

const N = 100_000;
const ZIPF_KEYS = 100_000;
const PER_CALL = 12;
const CALLS = 3000;
const VALUE = 'abcdefghi'; // a GCRA state's size: code byte + one double
const zipfCases: [string, string][] = [
  ['GET', "redis.call('GET', k)"],
  ['SET … PX', `redis.call('SET', k, '${VALUE}', 'PX', 60000)`],
  [
    'GET + SET … PX (a decision)',
    `redis.call('GET', k) redis.call('SET', k, '${VALUE}', 'PX', 60000)`,
  ],
  ['GET + SET … KEEPTTL', `redis.call('GET', k) redis.call('SET', k, '${VALUE}', 'KEEPTTL')`],
];

const cases: [string, string][] = [
  ['empty loop', ''],
  [
    "struct.unpack('<BddddddB') of one packed item",
    "local a, b = struct.unpack('<BddddddB', item, 1)",
  ],
  ['a two-field table', 'local t = { tokens = i, ts = i }'],
  ["struct.pack('<Bdd')", "local s = struct.pack('<Bdd', 1, i, i + 0.5)"],
  ['GET', "local v = redis.call('GET', k)"],
  ['SET', "redis.call('SET', k, 'abcdefghijklmnopq')"],
  ['SET … PX', "redis.call('SET', k, 'abcdefghijklmnopq', 'PX', 60000)"],
  ['SET … KEEPTTL', "redis.call('SET', k, 'abcdefghijklmnopq', 'KEEPTTL')"],
  ['PTTL', "local t = redis.call('PTTL', k)"],
];

const server = await RedisServer.start();
const redis = server.client();
try {
  await redis.set('bench:k', 'abcdefghijklmnopq', 'PX', 600_000);
  const item = Buffer.alloc(50);
  const empty = await time('');
  console.log(
    `Redis ${(await redis.info('server')).match(/redis_version:(\S+)/)?.[1]}, ${N} iterations per EVAL, median of 5\n`,
  );
  console.log('| command in a script | µs each |\n|---|--:|');
  for (const [name, body] of cases) {
    const us = name === 'empty loop' ? empty : (await time(body)) - empty;
    console.log(`| ${name} | ${us.toFixed(2)} |`);
  }

  /** Median µs per iteration of `body` over 5 EVALs. */
  console.log(
    `\nOn ${ZIPF_KEYS.toLocaleString('en-US')} keys, Zipf(1.0), ${PER_CALL} keys per EVALSHA, ${CALLS} calls, median of 3\n`,
  );
  await zipfFloor(redis);

  async function time(body: string): Promise<number> {
    const script = `local k, item = KEYS[1], ARGV[1] for i = 1, ${N} do ${body} end return 1`;
    const runs: number[] = [];
    for (let r = 0; r < 5; r++) {
      await redis.config('RESETSTAT');
      await redis.eval(script, 1, 'bench:k', item);
      const stats = await redis.info('commandstats');
      runs.push(Number(/cmdstat_eval:calls=1,usec=(\d+)/.exec(stats)?.[1]) / N);
    }
    return runs.sort((a, b) => a - b)[2]!;
  }
} finally {
  redis.disconnect();
  await server.stop();
}

async function zipfFloor(redis: Redis): Promise<void> {
  const ring = keyRing('zipf', ZIPF_KEYS, 7);
  let n = 0;
  const nextKeys = (): string[] => {
    const keys: string[] = [];
    for (let i = 0; i < PER_CALL; i++)
      keys.push(`slb:{tenant=tenant-${ring[n++ & 0xfffff]!}}:tenant`);
    return keys;
  };
  const loop = (body: string): string =>
    `for i = 1, #KEYS do local k = KEYS[i] ${body} end return 1`;
  const fill = loop(`redis.call('SET', k, '${VALUE}', 'PX', 600000)`);
  for (let i = 0; i < ZIPF_KEYS; i += 1000) {
    const keys = Array.from({ length: 1000 }, (_, j) => `slb:{tenant=tenant-${i + j}}:tenant`);
    await redis.eval(fill, keys.length, ...keys);
  }
  const perKey = async (body: string): Promise<number> => {
    const sha = (await redis.script('LOAD', loop(body))) as string;
    const runs: number[] = [];
    for (let r = 0; r < 3; r++) {
      await redis.config('RESETSTAT');
      for (let c = 0; c < CALLS; c++) await redis.evalsha(sha, PER_CALL, ...nextKeys());
      const stats = await redis.info('commandstats');
      const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats)!;
      runs.push(Number(m[2]) / Number(m[1]) / PER_CALL);
    }
    return runs.sort((a, b) => a - b)[1]!;
  };
  const empty = await perKey('');
  console.log('| per key, in calls of 12 | µs each |\n|---|--:|');
  console.log(`| the call itself (empty loop) | ${empty.toFixed(2)} |`);
  for (const [name, body] of zipfCases) {
    console.log(`| ${name} | ${((await perKey(body)) - empty).toFixed(2)} |`);
  }
}
