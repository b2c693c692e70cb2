/**
 * Request-id deduplication in Redis (applyBatch.lua): a consume carrying a request id
 * leaves a small record, in the same atomic step and the same hash slot as the buckets it
 * charged; a repeat of the id within `dedupTtlMs` gets the first reply back and charges
 * nothing. Checked through the public Limiter API, with the raw keys read straight from
 * Redis. Figures are printed as `[idempotency] …` lines (quoted in docs/failure-modes.md).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { toDescriptor, type DescriptorInput } from '../../../src/core/descriptor.js';
import type { PolicyInput } from '../../../src/config/policies.js';
import { type Limiter } from '../../../src/limiter/limiter.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { bucketKey, dedupKey } from '../../../src/stores/key.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { RedisServer } from '../../support/redis-server.js';
import { sleep, waitFor } from '../../support/wait.js';
import { charged } from '../../support/redis-state.js';

const DEDUP_TTL_MS = 300;

/** Refill of one unit per hour: within a test the capacity is the burst. */
const slow = { rate: 1, period: '1h', burst: 10, failureMode: 'closed', timeout: '2s' } as const;
const policies: PolicyInput[] = [{ name: 'p', match: ['tenant'], ...slow }];

let server: RedisServer;
let direct: Redis;
let store: RedisStore;
let limiter: Limiter;

beforeAll(async () => {
  server = await RedisServer.start();
  direct = server.client();
  store = new RedisStore({ client: server.client(), dedupTtlMs: DEDUP_TTL_MS });
  limiter = createLimiter({ store, policies });
  await store.ready();
});

afterAll(async () => {
  await store?.close();
  await server?.stop();
});

beforeEach(async () => {
  await direct.flushall();
});

function report(line: string): void {
  console.log(`[idempotency] ${line}`);
}

/** The Redis key of a policy's bucket, and of a request id's record, for a descriptor. */
function keysOf(l: Limiter, policy: string, d: DescriptorInput, requestId: string) {
  const p = l.policies.find((x) => x.name === policy);
  if (p === undefined) throw new Error(`no policy ${policy}`);
  const bucket = bucketKey(p, toDescriptor(d));
  return { bucket: store.redisKey(bucket), record: store.redisKey(dedupKey(bucket, requestId)) };
}

describe('RedisStore request-id dedup', () => {
  it('the same id twice: the same result, charged once', async () => {
    const k = keysOf(limiter, 'p', { tenant: 'a' }, 'r1');
    const firstTry = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const again = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    report(
      `same id twice: charged ${(await charged(direct, k.bucket, slow.burst)) / 3} time(s) for 2 calls (permitted 1)`,
    );
    expect(firstTry.decisions[0]).toMatchObject({ path: 'store', allowed: true, remaining: 7 });
    expect(again).toEqual(firstTry);
    expect(await charged(direct, k.bucket, slow.burst)).toBe(3);
    expect(await direct.exists(k.record)).toBe(1);
  });

  it('a different id is a different request: charged again', async () => {
    const k = keysOf(limiter, 'p', { tenant: 'a' }, 'r1');
    await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const other = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r2' });
    expect(other.decisions[0]).toMatchObject({ path: 'store', allowed: true });
    expect(other.decisions[0]!.remaining).toBeCloseTo(4, 2);
    expect(await charged(direct, k.bucket, slow.burst)).toBe(6);
  });

  it('a replayed denial stays a denial, even once capacity would allow it', async () => {
    const k = keysOf(limiter, 'p', { tenant: 'a' }, 'big');
    await limiter.check({ tenant: 'a' }, { cost: 8 });
    const denied = await limiter.check({ tenant: 'a' }, { cost: 5, requestId: 'big' });
    await direct.del(k.bucket); // capacity is back in full
    const replay = await limiter.check({ tenant: 'a' }, { cost: 5, requestId: 'big' });
    expect(denied.status).toBe('OVER_LIMIT');
    expect(replay).toEqual(denied);
    expect(await charged(direct, k.bucket, slow.burst)).toBe(0); // the replay wrote nothing
  });

  it(`the record expires after dedupTtlMs (${DEDUP_TTL_MS}ms); the same id then charges again`, async () => {
    const k = keysOf(limiter, 'p', { tenant: 'a' }, 'r1');
    const t0 = performance.now();
    await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const pttl = await direct.pttl(k.record);
    await waitFor(async () => ((await direct.exists(k.record)) === 0 ? true : undefined), {
      what: 'the dedup record to expire',
      timeoutMs: DEDUP_TTL_MS + 2_000,
      intervalMs: 10,
    });
    const goneAfter = performance.now() - t0;
    const later = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    report(
      `dedup record: PTTL ${pttl}ms right after the first reply (dedupTtlMs ${DEDUP_TTL_MS}), ` +
        `gone ${Math.round(goneAfter)}ms after the call; the same id afterwards charged again ` +
        `(total ${(await charged(direct, k.bucket, slow.burst)) / 3} charges)`,
    );
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(DEDUP_TTL_MS);
    expect(goneAfter).toBeGreaterThanOrEqual(DEDUP_TTL_MS - 20);
    expect(later.decisions[0]!.remaining).toBeCloseTo(4, 2);
    expect(await charged(direct, k.bucket, slow.burst)).toBe(6);
  });

  it('a replay does not extend the record: it lives dedupTtlMs from the first reply (as in MemoryStore)', async () => {
    const k = keysOf(limiter, 'p', { tenant: 'a' }, 'r1');
    await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    const t0 = performance.now(); // the record was written before this
    await sleep(150); // the behaviour: real time passes on Redis's TTL clock, which no event shows
    await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'r1' });
    // PTTL is read after this instant, so the record is at least this old by then.
    const elapsed = performance.now() - t0;
    const pttl = await direct.pttl(k.record);
    report(
      `PTTL after a replay ${Math.round(elapsed)}ms later: ${pttl}ms (dedupTtlMs ${DEDUP_TTL_MS})`,
    );
    // A replay that extended the record would leave about the whole dedupTtlMs. (+1: PTTL
    // is in whole ms.)
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(DEDUP_TTL_MS - elapsed + 1);
  });

  it('the same id under two tenants: independent requests, independent records', async () => {
    const a = keysOf(limiter, 'p', { tenant: 'a' }, 'same');
    const b = keysOf(limiter, 'p', { tenant: 'b' }, 'same');
    const ra = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'same' });
    const rb = await limiter.check({ tenant: 'b' }, { cost: 4, requestId: 'same' });
    const ra2 = await limiter.check({ tenant: 'a' }, { cost: 3, requestId: 'same' });
    const rb2 = await limiter.check({ tenant: 'b' }, { cost: 4, requestId: 'same' });
    expect(a.record).not.toBe(b.record);
    expect(await direct.exists(a.record, b.record)).toBe(2);
    expect(ra.decisions[0]!.remaining).toBe(7);
    expect(rb.decisions[0]!.remaining).toBe(6);
    expect(ra2).toEqual(ra);
    expect(rb2).toEqual(rb);
    expect(await charged(direct, a.bucket, slow.burst)).toBe(3);
    expect(await charged(direct, b.bucket, slow.burst)).toBe(4);
  });

  it('a record is scoped to the identity (hash tag), not the whole descriptor: reusing an id for another route of the same tenant replays the first reply', async () => {
    const routes = createLimiter({
      store,
      policies: [{ name: 'route', match: ['tenant', 'route'], ...slow }],
    });
    const x = keysOf(routes, 'route', { tenant: 'a', route: '/x' }, 'reused');
    const y = keysOf(routes, 'route', { tenant: 'a', route: '/y' }, 'reused');
    const rx = await routes.check({ tenant: 'a', route: '/x' }, { cost: 3, requestId: 'reused' });
    const ry = await routes.check({ tenant: 'a', route: '/y' }, { cost: 5, requestId: 'reused' });
    report(
      `request id reused across routes of one tenant: /x charged ${await charged(direct, x.bucket, slow.burst)}, ` +
        `/y charged ${await charged(direct, y.bucket, slow.burst)} (asked 5) and answered remaining ${ry.decisions[0]!.remaining} ` +
        `(the /x reply): ids must be unique per request, not per descriptor`,
    );
    expect(x.record).toBe(y.record);
    expect(ry).toEqual(rx);
    expect(await charged(direct, y.bucket, slow.burst)).toBe(0);
  });

  it('MEMORY USAGE of one dedup record', async () => {
    const id = '5f0c6a1e-9b7d-4c1a-8e2f-3d4b5a6c7d8e'; // a UUID, a typical request id
    const k = keysOf(limiter, 'p', { tenant: 'acme' }, id);
    await limiter.check({ tenant: 'acme' }, { requestId: id });
    const bytes = await direct.memory('USAGE', k.record);
    const bucketBytes = await direct.memory('USAGE', k.bucket);
    const value = (await direct.getBuffer(k.record)) ?? Buffer.alloc(0);
    report(
      `one dedup record (UUID request id, key ${k.record.length} B, value ${value.length} B): ` +
        `MEMORY USAGE ${bytes} bytes (the token-bucket state beside it: ${bucketBytes} bytes)`,
    );
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(512);
  });
});
