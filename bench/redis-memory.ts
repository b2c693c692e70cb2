/**
 * Redis memory per bucket, per algorithm (run with `npx tsx bench/redis-memory.ts`).
 * Starts its own redis-server on 127.0.0.1 through test/support's harness, creates 10,000
 * buckets per algorithm through RedisStore (server clock, the keys `bucketKey` gives, like
 * `sl:{tenant-123456}:payments-tenant`), and prints a markdown table with the
 * average `MEMORY USAGE` of a key and the `INFO memory` used_memory growth per bucket
 * (which also counts the expiry entry every bucket has). Nothing here asserts.
 */
import type { Redis } from 'ioredis';
import { ALGORITHMS } from '../src/algorithms/index.js';
import { parsePolicies } from '../src/config/policies.js';
import { toDescriptor } from '../src/core/descriptor.js';
import type { Policy } from '../src/core/policy.js';
import type { AlgorithmKind } from '../src/algorithms/index.js';
import { bucketKey } from '../src/stores/key.js';
import { RedisStore } from '../src/stores/redis/redis-store.js';
import type { StoreRequest } from '../src/stores/store.js';
import { RedisServer } from '../test/support/redis-server.js';

const N = 10_000;
const [KEY_POLICY] = parsePolicies([{ name: 'payments-tenant', match: ['tenant'], rate: 1 }])
  .policies as [Policy];
const CHUNK = 500;
const BATCH = 10;

interface Case {
  readonly kind: AlgorithmKind;
  /** Policy fields of the algorithm. TTLs are long enough that nothing expires mid-run. */
  readonly params: Record<string, unknown>;
  /** Admitted requests (cost 1) per bucket: the sliding log grows with them. */
  readonly admitted: number;
}

const CASES: readonly Case[] = [
  { kind: 'token-bucket', params: { rate: 100, period: '1m', burst: 100 }, admitted: 1 },
  { kind: 'gcra', params: { rate: 100, period: '1m', burst: 100 }, admitted: 1 },
  { kind: 'leaky-bucket', params: { rate: 100, period: '1m', capacity: 100 }, admitted: 1 },
  { kind: 'fixed-window', params: { limit: 100, window: '1h' }, admitted: 1 },
  { kind: 'sliding-window-counter', params: { limit: 100, window: '1h' }, admitted: 1 },
  { kind: 'sliding-log', params: { limit: 100, window: '1h' }, admitted: 1 },
  { kind: 'sliding-log', params: { limit: 100, window: '1h' }, admitted: 10 },
  { kind: 'sliding-log', params: { limit: 100, window: '1h' }, admitted: 100 },
];

/** The bucket key Sluice gives tenant `tenant-<100000 + i>` under a policy `payments-tenant`. */
const keyOf = (i: number): string =>
  bucketKey(KEY_POLICY, toDescriptor({ tenant: `tenant-${100_000 + i}` }));

async function usedMemory(client: Redis): Promise<number> {
  const m = /used_memory:(\d+)/.exec(await client.info('memory'));
  if (!m) throw new Error('INFO memory has no used_memory');
  return Number(m[1]);
}

async function measure(server: RedisServer, c: Case): Promise<string> {
  const client = server.client();
  const store = new RedisStore({ client }); // server clock, prefix "sl"
  try {
    const [policy] = parsePolicies([
      { name: 'payments-tenant', match: ['tenant'], algorithm: c.kind, ...c.params },
    ]).policies;
    const algorithm = ALGORITHMS[c.kind];
    const request = (key: string): StoreRequest => ({
      key,
      algorithm,
      params: policy!.params,
      cost: 1,
      enforce: true,
    });
    /** `perKey` admitted requests on each key, as one batch per key (they chain in order). */
    const decide = async (keys: readonly string[], perKey = 1): Promise<void> => {
      const results = await Promise.all(
        keys.map((k) =>
          store.apply(
            Array.from({ length: perKey }, () => request(k)),
            { nowMs: 0 },
          ),
        ),
      );
      for (const r of results.flat()) {
        if (!r.ok) throw r.error;
        if (!r.decision.allowed) throw new Error(`${c.kind}: a bench request was denied`);
      }
    };

    await client.flushdb();
    // Load the script and let the allocator settle before the baseline.
    await decide(['{warm-up}:payments-tenant']);
    await client.flushdb();
    const before = await usedMemory(client);
    // Sliding-log entries arrive in batches of up to 10 admitted requests per key; each
    // entry is its own sorted-set member either way.
    for (let left = c.admitted; left > 0; left -= BATCH) {
      for (let i = 0; i < N; i += CHUNK) {
        await decide(
          Array.from({ length: Math.min(CHUNK, N - i) }, (_, j) => keyOf(i + j)),
          Math.min(BATCH, left),
        );
      }
    }
    const after = await usedMemory(client);
    const keys = await client.dbsize();
    if (keys !== N) throw new Error(`${c.kind}: expected ${N} keys, found ${keys}`);

    let usage = 0;
    for (let i = 0; i < N; i += CHUNK) {
      const pipeline = client.pipeline();
      for (let j = i; j < Math.min(N, i + CHUNK); j++) {
        pipeline.call('MEMORY', 'USAGE', store.redisKey(keyOf(j)), 'SAMPLES', '0');
      }
      for (const [error, bytes] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        usage += Number(bytes);
      }
    }
    const sample = store.redisKey(keyOf(0));
    const type = await client.type(sample);
    const value =
      type === 'string'
        ? `${(await client.getBuffer(sample))!.length} bytes, packed`
        : `${type}, ${await client.zcard(sample)} member(s)`;
    const fields = Object.entries(c.params)
      .map(([k, v]) => `${k} ${String(v)}`)
      .join(', ');
    return `| ${c.kind} | ${fields} | ${c.admitted} | ${value} | ${Math.round(usage / N)} | ${Math.round((after - before) / N)} |`;
  } finally {
    await store.close();
    client.disconnect();
  }
}

const server = await RedisServer.start();
try {
  const version = /redis_version:(\S+)/.exec(await server.client().info('server'))?.[1];
  console.log(
    `RedisStore memory per bucket: ${N.toLocaleString('en-US')} buckets per row, redis-server ${version ?? '?'}, ` +
      `keys like \`${`sl:${keyOf(23_456)}`}\` (${`sl:${keyOf(0)}`.length} bytes)\n`,
  );
  console.log(
    '| algorithm | params | admitted per bucket | stored value (example) | MEMORY USAGE, bytes per key | used_memory growth, bytes per bucket |',
  );
  console.log('|---|---|---:|---|---:|---:|');
  for (const c of CASES) console.log(await measure(server, c));
} finally {
  await server.stop();
}
