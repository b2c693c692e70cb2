/**
 * A replica by mistake: the store decides only on a primary. Real redis-server processes
 * (a primary and its replica); the service runs in-process and as the spawned CLI.
 * Pointed at a replica, or with replica reads configured, the store refuses at start with
 * SLUICE_ERR_STORE_REPLICA; a primary demoted under a running store stops deciding (the
 * policy's failure mode answers) and decides again once it is a primary.
 */
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { CheckResult } from '../../../src/limiter/check-result.js';
import { createLimiter } from '../../../src/local/create-limiter.js';
import { startService } from '../../../src/service/main.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { decidedByStore } from '../../support/check-results.js';
import { RedisServer, stopAllRedisServers } from '../../support/redis-server.js';
import { spawnServe } from '../../support/sluice-serve.js';
import { waitFor } from '../../support/wait.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse())
    await Promise.resolve()
      .then(c)
      .catch(() => undefined);
});
afterAll(() => stopAllRedisServers());

function report(line: string): void {
  console.log(`[replica] ${line}`);
}

async function pair(extraArgs: readonly string[] = []) {
  const primary = await RedisServer.start({ extraArgs });
  const replica = await RedisServer.start({ replicaOf: primary, extraArgs });
  cleanups.push(
    () => replica.stop(),
    () => primary.stop(),
  );
  return { primary, replica };
}

function store(url: string, roleCheckMs?: number): RedisStore {
  const s = RedisStore.connect(url, roleCheckMs === undefined ? {} : { roleCheckMs });
  cleanups.push(() => s.close());
  return s;
}

const policies = [
  {
    name: 'p',
    match: ['tenant'],
    rate: 1,
    period: '1h',
    burst: 1000,
    failureMode: 'closed' as const,
    timeout: '500ms',
  },
];

const refusedBy = (r: CheckResult): string | undefined =>
  r.decisions[0]?.path === 'fail-closed' ? r.status : undefined;

describe('pointed at a replica', () => {
  it('RedisStore.connect: ready() rejects with SLUICE_ERR_STORE_REPLICA naming the primary; checks take the failure mode', async () => {
    const { primary, replica } = await pair();
    const s = store(replica.url);
    const error = await s.ready().then(
      () => undefined,
      (e: unknown) => e,
    );
    report(`RedisStore.connect(replica): ${String((error as Error | undefined)?.message)}`);
    expect(error).toMatchObject({
      name: 'StoreError',
      code: 'SLUICE_ERR_STORE_REPLICA',
      reason: 'readonly',
    });
    expect((error as Error).message).toBe(
      `Redis at 127.0.0.1:${replica.port} is a replica of 127.0.0.1:${primary.port} (link connected): the store decides only on a primary, never on a copy that may be stale`,
    );
    const limiter = createLimiter({ store: s, policies });
    const r = await limiter.check({ tenant: 'a' });
    expect(r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(refusedBy(r)).toBe('UNAVAILABLE');
    // Nothing was written on the replica (it has no key of ours).
    expect(await replica.client().dbsize()).toBe(0);
  });

  it('the service refuses to start (startService rejects; `sluice serve` exits 2 with the message)', async () => {
    const { primary, replica } = await pair();
    await expect(
      startService({
        envoyConfig: join(import.meta.dirname, '../../service/fixtures/redis-svc'),
        redis: { type: 'single', url: replica.url },
        host: '127.0.0.1',
        grpcHost: '127.0.0.1',
        port: 0,
        grpcPort: 0,
        logger: (await import('pino')).pino({ level: 'silent' }),
      }),
    ).rejects.toMatchObject({
      code: 'SLUICE_ERR_STORE_REPLICA',
      message: expect.stringContaining(`is a replica of 127.0.0.1:${primary.port}`) as string,
    });
    const serve = spawnServe(
      ['--config', join(import.meta.dirname, '../../service/fixtures/redis-svc')],
      {
        REDIS_URL: `127.0.0.1:${replica.port}`,
      },
    );
    await expect(serve).rejects.toThrow(
      `sluice: Redis at 127.0.0.1:${replica.port} is a replica of 127.0.0.1:${primary.port} (link connected): the store decides only on a primary, never on a copy that may be stale [SLUICE_ERR_STORE_REPLICA]`,
    );
  });

  it('replica reads configured on the client are refused when the store is made', () => {
    const seed = new Redis({ lazyConnect: true, readOnly: true });
    expect(() => new RedisStore({ client: seed })).toThrow(
      expect.objectContaining({
        code: 'SLUICE_ERR_STORE_REPLICA',
        message:
          'RedisStore: the client is set to read from replicas (readOnly: true); the store decides only on primaries, never on a copy that may be stale',
      }),
    );
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      scaleReads: 'slave',
    });
    expect(() => new RedisStore({ client: cluster })).toThrow(/scaleReads: "slave"/);
    seed.disconnect();
    cluster.disconnect();
  });
});

describe('a primary demoted under a running store', () => {
  for (const readOnly of ['yes', 'no'] as const) {
    it(`stops deciding, never on stale state, and decides again once promoted (replica-read-only ${readOnly})`, async () => {
      const { primary, replica } = await pair(['--replica-read-only', readOnly]);
      const ROLE_CHECK_MS = 200;
      const s = store(primary.url, ROLE_CHECK_MS);
      await s.ready();
      const limiter = createLimiter({ store: s, policies });
      expect((await limiter.check({ tenant: 'a' }, { cost: 10 })).allowed).toBe(true);

      // Demote the primary under the store: it follows its former replica, promoted.
      await replica.client().replicaof('NO', 'ONE');
      const admin = primary.client();
      await admin.replicaof('127.0.0.1', String(replica.port));
      const demotedAt = performance.now();
      const answers: CheckResult[] = [];
      const stoppedAt = await waitFor(
        async () => {
          const r = await limiter.check({ tenant: 'a' });
          answers.push(r);
          return decidedByStore(r) ? undefined : performance.now();
        },
        {
          what: 'the store to stop deciding on the demoted primary',
          timeoutMs: 5_000,
          intervalMs: 10,
        },
      );
      const decidedAfter = answers.filter(decidedByStore).length;
      report(
        `replica-read-only ${readOnly}: the demoted primary stopped deciding ${Math.round(stoppedAt - demotedAt)}ms after REPLICAOF ` +
          `(${decidedAfter} decisions meanwhile; role asked every ${ROLE_CHECK_MS}ms)`,
      );
      const refused = answers.at(-1)!;
      expect(refused).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
      if (readOnly === 'yes') {
        // Redis refuses the write itself: no decision at all after the demotion.
        expect(decidedAfter).toBe(0);
      } else {
        // A writable replica answers until the next ROLE question.
        expect(stoppedAt - demotedAt).toBeLessThan(ROLE_CHECK_MS + 1_000);
      }
      // Every later check is refused while it is a replica.
      for (let i = 0; i < 5; i++)
        expect(decidedByStore(await limiter.check({ tenant: 'a' }))).toBe(false);

      // Promoted again: the store decides again on its own.
      await admin.replicaof('NO', 'ONE');
      await waitFor(
        async () => (decidedByStore(await limiter.check({ tenant: 'a' })) ? true : undefined),
        { what: 'decisions once it is a primary again', timeoutMs: 5_000, intervalMs: 20 },
      );
    });
  }
});
