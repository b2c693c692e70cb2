/**
 * The lease stage in the limiter's check pipeline, through the public API: a policy with a
 * lease is decided in process on the `lease` path and never reaches the store; the other
 * policies of the same check go to the store (a real MemoryStore that records what it is
 * asked); when one of them denies, the lease gets its units back.
 */
import { describe, expect, it } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { QuotaAgent } from '../../src/quota/agent.js';
import { LeaseStage } from '../../src/quota/lease-stage.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { StoreApplyOptions, StoreRequest } from '../../src/stores/store.js';

const t0 = 1_700_000_000_000; // a whole second: lease windows start here

class RecordingStore extends MemoryStore {
  keys: string[] = [];
  override apply(batch: readonly StoreRequest[], o: StoreApplyOptions) {
    for (const r of batch) this.keys.push(r.key);
    return super.apply(batch, o);
  }
}

const policies: PolicyInput[] = [
  {
    name: 'global-api',
    match: [{ key: 'route' }],
    algorithm: 'token-bucket',
    rate: 1000,
    period: '1s',
    burst: 1000,
  },
  {
    name: 'tenant',
    match: [{ key: 'tenant' }],
    algorithm: 'token-bucket',
    rate: 1,
    period: '1h',
    burst: 2,
  },
];

function setup(fallback: QuotaAgent['options']['fallback'] = { kind: 'deny' }) {
  const clock = new ManualClock(t0);
  const store = new RecordingStore();
  const agent = new QuotaAgent({ agent: 'a', bucket: 'global-api', fallback }, t0);
  agent.apply(
    {
      agent: 'a',
      bucket: 'global-api',
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
  const stage = new LeaseStage({ policies: ['global-api'], agentFor: () => agent });
  const limiter = createLimiter({ store, policies, clock, stages: [stage] });
  return { clock, store, agent, limiter };
}

describe('lease stage in the limiter', () => {
  it('decides the leased policy in process (path lease); only the other policy reaches the store', async () => {
    const { store, limiter } = setup();
    const r = await limiter.check({ route: '/x', tenant: 'acme' });
    expect(r.allowed).toBe(true);
    expect(r.decisions.map((d) => [d.policy, d.path])).toEqual([
      ['global-api', 'lease'],
      ['tenant', 'store'],
    ]);
    expect(store.keys.some((k) => k.includes('global-api'))).toBe(false);
    expect(store.keys.some((k) => k.includes('tenant'))).toBe(true);
  });

  it('denies on the lease once its window is spent, with the wait until the next window', async () => {
    const { clock, limiter } = setup();
    for (let i = 0; i < 3; i++) expect((await limiter.check({ route: '/x' })).allowed).toBe(true);
    clock.advance(250);
    const r = await limiter.check({ route: '/x' });
    expect(r.allowed).toBe(false);
    expect(r.status).toBe('OVER_LIMIT');
    expect(r.decisions[0]).toMatchObject({
      policy: 'global-api',
      path: 'lease',
      retryAfterMs: 750,
    });
    clock.advance(750);
    expect((await limiter.check({ route: '/x' })).allowed).toBe(true);
  });

  it('gives the lease its units back when another policy denies the check', async () => {
    const { agent, limiter } = setup();
    await limiter.check({ route: '/x', tenant: 'acme' });
    await limiter.check({ route: '/x', tenant: 'acme' });
    // The tenant's burst (2) is spent: this check is denied by the store's policy.
    const denied = await limiter.check({ route: '/x', tenant: 'acme' });
    expect(denied.allowed).toBe(false);
    expect(agent.window(t0).used).toBe(2);
    expect(agent.report(t0 + 1_000).allowed).toBe(2);
  });

  it('under the store fallback, an expired lease hands the policy back to the store', async () => {
    const { clock, store, limiter } = setup({ kind: 'store' });
    clock.advance(3_000);
    const r = await limiter.check({ route: '/x' });
    expect(r.decisions[0]).toMatchObject({ policy: 'global-api', path: 'store', allowed: true });
    expect(store.keys.some((k) => k.includes('global-api'))).toBe(true);
  });

  it('under the store fallback, the store decisions are still reported to the controller as usage', async () => {
    const { clock, agent, limiter } = setup({ kind: 'store' });
    agent.report(t0); // the lease's window: nothing used
    clock.advance(3_000); // the lease has expired: the store decides
    for (let i = 0; i < 4; i++) await limiter.check({ route: '/x' });
    // Two more with the tenant: the tenant's burst (2) admits both, then denies a third,
    // which the store decided as a whole (global-api was not consumed): demand, not use.
    await limiter.check({ route: '/x', tenant: 'acme' });
    await limiter.check({ route: '/x', tenant: 'acme' });
    const denied = await limiter.check({ route: '/x', tenant: 'acme' });
    expect(denied.allowed).toBe(false);
    const r = agent.report(clock.nowMs());
    expect(r.allowed).toBe(6);
    expect(r.denied).toBe(0);
  });
});
