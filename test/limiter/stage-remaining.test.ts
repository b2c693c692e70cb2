/**
 * `remaining` on decisions a stage answers, through the public API (createLimiter with a
 * real MemoryStore and a still clock): a batch decision reports what the global bucket
 * and this instance's reserve hold together; a lease decision what is left of the lease's
 * window. Each expected figure is derived beside it.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { QuotaAgent } from '../../src/quota/agent.js';
import { LeaseStage } from '../../src/quota/lease-stage.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';

describe('remaining on stage decisions', () => {
  it('batch: the global bucket plus the unspent reserve, 1 less per admitted check', async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      clock: new ManualClock(0),
      policies: [
        {
          name: 'api',
          match: ['tenant'],
          rate: 1_000,
          burst: 1_000,
          batch: { size: 8, ttl: '1s' },
        },
      ],
    });
    const seen: [string | undefined, number][] = [];
    for (let i = 0; i < 12; i++) {
      const d = (await limiter.check({ tenant: 'a' })).decisions[0]!;
      seen.push([d.path, d.remaining]);
    }
    // The clock stands still, so nothing refills: after n admitted checks the bucket and
    // the reserve together hold 1000 - n, whatever the reservations' sizes (1, 2, 4, 8).
    expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => ['batch', 1_000 - (i + 1)]));
    await limiter.close();
  });

  it('lease: what is left of the window, 1 less per admitted check', async () => {
    const t0 = 1_700_000_000_000; // a whole second: lease windows start here
    const agent = new QuotaAgent({ agent: 'a', bucket: 'api', fallback: { kind: 'deny' } }, t0);
    agent.apply(
      {
        agent: 'a',
        bucket: 'api',
        rate: 3,
        burst: 3,
        windowMs: 1_000,
        ttlMs: 3_000,
        version: 1,
        fencingToken: 1,
        issuedAtMs: t0,
      },
      t0,
    );
    const limiter = createLimiter({
      store: new MemoryStore(),
      clock: new ManualClock(t0),
      policies: [{ name: 'api', match: ['route'], rate: 1_000, burst: 1_000 }],
      stages: [new LeaseStage({ policies: ['api'], agentFor: () => agent })],
    });
    const seen: [string | undefined, boolean, number][] = [];
    for (let i = 0; i < 4; i++) {
      const d = (await limiter.check({ route: '/x' })).decisions[0]!;
      seen.push([d.path, d.allowed, d.remaining]);
    }
    // A window of 3: 2, 1, 0 left after each admitted check; the fourth is denied with 0.
    expect(seen).toEqual([
      ['lease', true, 2],
      ['lease', true, 1],
      ['lease', true, 0],
      ['lease', false, 0],
    ]);
  });
});
