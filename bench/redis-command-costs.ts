/**
 * What single commands cost inside a Redis script on this machine: each is run 100,000
 * times in a loop in one EVAL (no network, no client), and `INFO commandstats` gives the
 * EVAL's time. The floor under any per-decision Lua: a decision reads its state and writes
 * it back with an expiry. `npx tsx bench/redis-command-costs.ts` (5 runs each, medians).
 */
import { RedisServer } from '../test/support/redis-server.js';

const N = 100_000;
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
