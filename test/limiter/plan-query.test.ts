/**
 * Limiter.check of a PlanQuery, what a rule set that matches requests itself (the envoy
 * rules) checks: limits whose plans count all-or-nothing or independently, under the
 * plans' names, a cost above capacity decided as OVER_LIMIT, params that charge denials.
 * On the memory store and on a real redis-server (client clock, so both see the same
 * instants).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedWindow } from '../../src/algorithms/fixed-window.js';
import { PolicyError } from '../../src/core/errors.js';
import type { Policy } from '../../src/core/policy.js';
import { parsePolicies } from '../../src/config/policies.js';
import { PlanQuery, type Limiter, type PlanSpec } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import type { Store } from '../../src/stores/store.js';
import { RedisServer } from '../support/redis-server.js';

// A generous store deadline: exactness, not latency, is under test (and fail-open, the
// default failure mode, would hide a late answer).
const [tight, loose] = parsePolicies([
  { name: 'tight', match: ['t'], algorithm: 'fixed-window', limit: 2, window: '1m', timeout: '5s' },
  {
    name: 'loose',
    match: ['t'],
    algorithm: 'fixed-window',
    limit: 10,
    window: '1m',
    timeout: '5s',
  },
]).policies as [Policy, Policy];
/** `loose`, counting as envoyproxy/ratelimit does: a denied request is charged too. */
const counting: Policy = Object.freeze({
  ...loose,
  name: 'counting',
  params: fixedWindow.chargingDenied!(loose.params as never) as never,
});

const T = 1_700_000_010_000; // 30 s into a minute
/** The spec of `policy` in a counting mode: one object per pair, as a rule set keeps them. */
const specs = new WeakMap<Policy, Map<boolean, PlanSpec>>();
function specOf(policy: Policy, independent: boolean): PlanSpec {
  let modes = specs.get(policy);
  if (modes === undefined) specs.set(policy, (modes = new Map()));
  let spec = modes.get(independent);
  if (spec === undefined)
    modes.set(independent, (spec = { policy, name: policy.name, independent }));
  return spec;
}
interface Item {
  readonly policy: Policy;
  readonly value: string;
  readonly cost: number;
}
const item = (policy: Policy, value: string, cost = 1): Item => ({ policy, value, cost });
/** A query of `items`, counted independently or all-or-nothing. */
function query(items: readonly Item[], independent = false): PlanQuery {
  const q = new PlanQuery();
  for (const i of items) q.add(specOf(i.policy, independent), { t: i.value }, i.cost);
  return q;
}

const stores = [
  { name: 'memory', redis: false },
  { name: 'redis', redis: true },
] as const;

describe.each(stores)('Limiter.check of a PlanQuery ($name store)', ({ redis }) => {
  let server: RedisServer | undefined;
  let store: Store;
  let limiter: Limiter;
  let n = 0;
  const v = (): string => `v${++n}`;

  beforeAll(async () => {
    if (redis) {
      server = await RedisServer.start();
      store = new RedisStore({ client: server.client(), clock: 'client' });
      await (store as RedisStore).ready();
    } else store = new MemoryStore();
    limiter = createLimiter({ store, policies: [] });
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  const remaining = async (p: Policy, value: string): Promise<number> =>
    (await limiter.checkAt(T, query([item(p, value, 0)]))).decisions[0]!.remaining;

  it('all-or-nothing: one denial charges nothing', async () => {
    const a = v();
    const r = await limiter.checkAt(T, query([item(tight, a, 3), item(loose, a)]));
    expect(r.status).toBe('OVER_LIMIT');
    expect([await remaining(tight, a), await remaining(loose, a)]).toEqual([2, 10]);
  });

  it('independent: every item is charged on its own, and a repeat sees the one before', async () => {
    const a = v();
    const r = await limiter.checkAt(
      T,
      query([item(tight, a, 2), item(tight, a), item(loose, a, 6), item(loose, a, 6)], true),
    );
    expect(r.status).toBe('OVER_LIMIT');
    expect(r.decisions.map((d) => [d.policy, d.status, d.remaining])).toEqual([
      ['tight', 'OK', 0],
      ['tight', 'OVER_LIMIT', 0],
      ['loose', 'OK', 4],
      ['loose', 'OVER_LIMIT', 4],
    ]);
    expect([await remaining(tight, a), await remaining(loose, a)]).toEqual([0, 4]);
  });

  it('independent with a request id: a retry returns the first decisions and charges once', async () => {
    const a = v();
    const items = [item(loose, a, 3), item(loose, a, 3)];
    const first = await limiter.checkAt(T, query(items, true), { requestId: `r-${a}` });
    const again = await limiter.checkAt(T, query(items, true), { requestId: `r-${a}` });
    expect(first.decisions.map((d) => d.remaining)).toEqual([7, 4]);
    expect(again.decisions.map((d) => d.remaining)).toEqual([7, 4]);
    expect(await remaining(loose, a)).toBe(4);
  });

  it('a cost above capacity is OVER_LIMIT that never fits, not an error, in both modes', async () => {
    for (const independent of [false, true]) {
      const a = v();
      const r = await limiter.checkAt(T, query([item(loose, a, 11), item(tight, a)], independent));
      expect(r).toMatchObject({ allowed: false, status: 'OVER_LIMIT', retryAfterMs: Infinity });
      expect(r.decisions[0]).toMatchObject({
        policy: 'loose',
        status: 'OVER_LIMIT',
        allowed: false,
        remaining: 10,
        retryAfterMs: Infinity,
      });
      // the other item: charged only when independent
      expect(await remaining(tight, a)).toBe(independent ? 1 : 2);
    }
    // checkAt still refuses it: the library caller chose the cost
    await expect(
      createLimiter({ store, policies: [{ ...tightInput }] }).check({ t: v() }, { cost: 3 }),
    ).rejects.toMatchObject({ code: 'SLUICE_ERR_COST_EXCEEDS_CAPACITY' });
  });

  it('charges denials under counting params, independently only', async () => {
    const a = v();
    const r = await limiter.checkAt(
      T,
      query([item(counting, a, 15), item(counting, a, 0), item(loose, a, 3)], true),
    );
    expect(r.decisions.map((d) => [d.status, d.remaining, d.retryAfterMs])).toEqual([
      ['OVER_LIMIT', 10, Infinity], // 15 > 10, charged: 15
      ['OVER_LIMIT', 0, 30_000], // 15 + 0 > 10: over until the window ends
      ['OK', 7, 0],
    ]);
    await expect(limiter.checkAt(T, query([item(counting, a)]))).rejects.toThrow(PolicyError);
    await expect(limiter.checkAt(T, query([item(counting, a)]))).rejects.toMatchObject({
      code: 'SLUICE_ERR_POLICY_UNSUPPORTED',
      message: expect.stringContaining('"counting" charges denied requests') as unknown,
    });
  });
});

const tightInput = {
  name: 'tight',
  match: ['t'],
  algorithm: 'fixed-window' as const,
  limit: 2,
  window: '1m',
};

describe('A PlanQuery counted independently on Redis: a failing item fails alone', () => {
  let server: RedisServer;
  let store: RedisStore;
  beforeAll(async () => {
    server = await RedisServer.start();
    store = new RedisStore({ client: server.client(), clock: 'client' });
    await store.ready();
  });
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });

  it('a key holding something else is that item’s failure mode; the others are decided', async () => {
    const closed: Policy = Object.freeze({ ...loose, failureMode: 'closed' as const });
    const limiter = createLimiter({ store, policies: [] });
    // the bucket of closed/t=bad, overwritten by someone else's data
    await server.client().set(store.redisKey(`{bad}:${closed.name}`), 'not sluice state');
    const r = await limiter.checkAt(T, query([item(closed, 'bad'), item(closed, 'good')], true));
    expect(r.decisions.map((d) => [d.status, d.path])).toEqual([
      ['UNAVAILABLE', 'fail-closed'],
      ['OK', 'store'],
    ]);
    // all-or-nothing: the whole batch takes the failure mode
    const all = await limiter.checkAt(T, query([item(closed, 'bad'), item(closed, 'good')]));
    expect(all.decisions.map((d) => d.path)).toEqual(['fail-closed', 'fail-closed']);
  });
});

describe('A PlanQuery: names, modes and keys come from its plans', () => {
  it('decides under the spec’s name, and tells each decision with the key it built', async () => {
    const limiter = createLimiter({ store: new MemoryStore(), policies: [] });
    const spec: PlanSpec = { policy: tight, name: 'public-tight', independent: true };
    const told: [string, string, number][] = [];
    const r = await limiter.checkAt(
      T,
      new PlanQuery().add(spec, { t: 'k1' }, 2).add(spec, { t: 'k2' }, 3),
      { onDecision: (d, key, i) => told.push([d.policy, key, i]) },
    );
    expect(r.decisions.map((d) => [d.policy, d.status])).toEqual([
      ['public-tight', 'OK'],
      ['public-tight', 'OVER_LIMIT'],
    ]);
    expect(told).toEqual([
      ['public-tight', '{k1}:tight', 0],
      ['public-tight', '{k2}:tight', 1],
    ]);
  });

  it('refuses a query that mixes counting modes, and the policies option, naming why', async () => {
    const limiter = createLimiter({ store: new MemoryStore(), policies: [] });
    const mixed = new PlanQuery()
      .add(specOf(tight, true), { t: 'm' }, 1)
      .add(specOf(loose, false), { t: 'm' }, 1);
    await expect(limiter.checkAt(T, mixed)).rejects.toMatchObject({
      code: 'SLUICE_ERR_POLICY_UNSUPPORTED',
      message: expect.stringContaining('mixes limits counted on their own') as unknown,
    });
    await expect(
      limiter.checkAt(T, query([item(tight, 'm')]), { policies: ['tight'] }),
    ).rejects.toMatchObject({ code: 'SLUICE_ERR_POLICY_UNSUPPORTED' });
    // nothing was charged by the refused checks
    expect((await limiter.checkAt(T, query([item(tight, 'm', 0)]))).decisions[0]!.remaining).toBe(
      2,
    );
  });
});
