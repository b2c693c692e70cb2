/**
 * docs/redis.md's "State and expiry per algorithm" table against what the Redis store
 * really writes: for every string state, the documented length and code byte, and
 * doubles after it (a real redis-server, one check per algorithm through the limiter).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import { RedisServer } from '../support/redis-server.js';
import { STATE_CODE, unpackState } from '../support/redis-state.js';

const doc = readFileSync(join(import.meta.dirname, '../../docs/redis.md'), 'utf8');

/** The "Redis value" cell of an algorithm's row in the state table. */
function documentedValue(algorithm: string): string {
  const row = doc.split('\n').find((l) => l.startsWith(`| \`${algorithm}\` `));
  if (row === undefined) throw new Error(`docs/redis.md has no state row for ${algorithm}`);
  return row.split('|')[2]!.trim();
}

const policies: Record<string, Record<string, unknown>> = {
  'token-bucket': { rate: 10, burst: 10 },
  gcra: { rate: 10, burst: 10 },
  'leaky-bucket': { rate: 10, capacity: 10 },
  'fixed-window': { limit: 10, window: '1m' },
  'sliding-window-counter': { limit: 10, window: '1m' },
};

/** The store decides or the check fails: a slow answer is still an answer here. */
const decidedByStore = { failureMode: 'closed', timeout: '30s' } as const;

let server: RedisServer;
let client: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  client = server.client();
});
afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

describe('docs/redis.md state table', () => {
  for (const [algorithm, fields] of Object.entries(policies)) {
    it(`${algorithm}: the documented packed string is what Redis holds`, async () => {
      const cell = documentedValue(algorithm);
      const m = /^(\d+)-byte string: code byte (\d+), then .*double/.exec(cell);
      expect(
        m,
        `"${cell}" should read "<n>-byte string: code byte <c>, then … doubles"`,
      ).not.toBeNull();
      const [bytes, code] = [Number(m![1]), Number(m![2])];
      expect(code).toBe(STATE_CODE[algorithm as keyof typeof STATE_CODE]);

      await client.flushdb();
      const store = new RedisStore({ client });
      const limiter = createLimiter({
        store,
        policies: [
          // The 10 ms default timeout is shorter than a first check takes on a loaded
          // 2-core machine (12-20 ms measured); only the stored state is under test here.
          {
            name: 'doc',
            match: ['tenant'],
            algorithm,
            ...fields,
            ...decidedByStore,
          } as unknown as PolicyInput,
        ],
      });
      const checked = await limiter.check({ tenant: 'acme' });
      // Decided by the store, so its write is in Redis before KEYS reads it (a failed-open
      // check may write later, or never).
      expect(checked.decisions.map((d) => [d.path, d.allowed])).toEqual([['store', true]]);
      const keys = await client.keys('*');
      expect(keys).toHaveLength(1);
      const raw = await client.getBuffer(keys[0]!);
      expect(raw?.length).toBe(bytes);
      expect(unpackState(raw, code)).toHaveLength((bytes - 1) / 8);
    });
  }
});
