import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { Store } from '../../src/stores/store.js';
import { StoreError } from '../../src/core/errors.js';
import type { PolicyInput } from '../../src/config/policies.js';

const payments: PolicyInput[] = [
  {
    name: 'payments-tenant',
    match: ['tenant'],
    rate: 100,
    period: '1s',
    burst: 20,
    cost: { rules: [{ when: { route: 'POST /transfers' }, cost: 5 }] },
    failureMode: 'closed',
  },
  {
    name: 'transfers-per-tenant',
    match: ['tenant', { key: 'route', value: 'POST /transfers' }],
    algorithm: 'fixed-window',
    limit: 3,
    window: '1m',
  },
];

function setup(policies: PolicyInput[] = payments, store: Store = new MemoryStore()) {
  const clock = new ManualClock(1_700_000_000_000);
  return { clock, limiter: createLimiter({ store, policies, clock }) };
}

const transfer = { tenant: 'acme', route: 'POST /transfers' };
const status = { tenant: 'acme', route: 'GET /transfers/{id}/status' };

describe('Limiter', () => {
  it('applies every matching policy with its own cost rule', async () => {
    const { limiter } = setup();
    const r = await limiter.check(transfer);
    expect(r.allowed).toBe(true);
    expect(r.decisions.map((d) => [d.policy, d.remaining])).toEqual([
      ['payments-tenant', 15], // 20 - 5 (transfer cost rule)
      ['transfers-per-tenant', 2], // 3 - 1 (default cost)
    ]);
    expect(r.decision?.policy).toBe('transfers-per-tenant'); // least remaining
    const s = await limiter.check(status);
    expect(s.decisions.map((d) => [d.policy, d.remaining])).toEqual([['payments-tenant', 14]]);
  });

  it('is all-or-nothing: when one policy denies, no policy is charged', async () => {
    const { limiter } = setup();
    for (let i = 0; i < 3; i++) expect((await limiter.check(transfer)).allowed).toBe(true);
    const denied = await limiter.check(transfer); // the per-route window is used up
    expect(denied).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
    expect(denied.decision?.policy).toBe('transfers-per-tenant');
    // the tenant bucket still holds 20 - 3*5 = 5: the denied transfer did not take 5 more
    expect((await limiter.check(status, { cost: 0 })).decisions[0]!.remaining).toBe(5);
  });

  it('reports the longest retry-after among denying policies', async () => {
    const { limiter, clock } = setup();
    for (let i = 0; i < 3; i++) await limiter.check(transfer); // tenant 5 left, window used up
    clock.advance(1_000); // tenant full again; the window has 59s left
    await limiter.check(status, { cost: 20 }); // tenant empty
    const r = await limiter.check(transfer);
    expect(r.decisions.map((d) => d.allowed)).toEqual([false, false]);
    // tenant: 5 tokens at 100/s = 50ms; window: 59s until the minute ends (clock is 1_700_000_001_000)
    const windowLeft = 60_000 - (1_700_000_001_000 % 60_000);
    expect(r.decisions.map((d) => d.retryAfterMs)).toEqual([50, windowLeft]);
    expect(r.retryAfterMs).toBe(windowLeft);
    expect(r.decision?.policy).toBe('transfers-per-tenant');
  });

  it('keeps tenants apart', async () => {
    const { limiter } = setup();
    await limiter.check({ tenant: 'acme' }, { cost: 20 });
    expect((await limiter.check({ tenant: 'acme' })).allowed).toBe(false);
    expect((await limiter.check({ tenant: 'globex' })).allowed).toBe(true);
  });

  it('honours a per-call cost over the cost rules, and cost 0 reads without consuming', async () => {
    const { limiter } = setup();
    expect((await limiter.check(status, { cost: 7 })).decisions[0]!.remaining).toBe(13);
    expect((await limiter.check(status, { cost: 0 })).decisions[0]!.remaining).toBe(13);
    expect((await limiter.check(status, { cost: 0 })).decisions[0]!.remaining).toBe(13);
  });

  it('refills with the injected clock', async () => {
    const { limiter, clock } = setup();
    await limiter.check(status, { cost: 20 });
    clock.advance(30); // 30ms * 100/s = 3 tokens
    expect((await limiter.check(status, { cost: 0 })).decisions[0]!.remaining).toBeCloseTo(3, 9);
    expect((await limiter.check(status, { cost: 4 })).retryAfterMs).toBeCloseTo(10, 9);
  });

  it('shadow mode decides and records but never blocks, and a shadow denial charges nothing', async () => {
    const { limiter } = setup([
      { name: 'real', match: ['tenant'], rate: 100, burst: 100 },
      { name: 'trial', match: ['tenant'], rate: 1, burst: 2, shadow: true },
    ]);
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await limiter.check({ tenant: 'a' }));
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, true]);
    expect(results.map((r) => r.decisions[1]!.allowed)).toEqual([true, true, false, false]);
    expect(results[3]!.decisions[1]).toMatchObject({
      status: 'OVER_LIMIT',
      path: 'shadow',
      policy: 'trial',
    });
    expect(results[3]!.decision?.policy).toBe('real'); // shadow decisions never decide
    expect(results[3]!.decisions[0]!.remaining).toBe(96);
  });

  it('allows, with no decisions, a request that matches no policy', async () => {
    const { limiter } = setup();
    expect(await limiter.check({ user: 'u1' })).toEqual({
      allowed: true,
      status: 'OK',
      retryAfterMs: 0,
      decision: undefined,
      decisions: [],
    });
  });

  it('checks only the named policies when asked', async () => {
    const { limiter } = setup();
    const r = await limiter.check(transfer, { policies: ['transfers-per-tenant'] });
    expect(r.decisions.map((d) => d.policy)).toEqual(['transfers-per-tenant']);
  });

  it('swaps policies atomically and keeps the old set when the new one is invalid', async () => {
    const { limiter } = setup();
    expect(() => limiter.setPolicies([{ name: 'x', match: [], rate: 1 }])).toThrow(PolicyError);
    expect(limiter.policies.map((p) => p.name)).toEqual([
      'payments-tenant',
      'transfers-per-tenant',
    ]);
    limiter.setPolicies([{ name: 'payments-tenant', match: ['tenant'], rate: 100, burst: 40 }]);
    expect((await limiter.check(status, { cost: 30 })).allowed).toBe(true);
  });

  describe('failure modes when the store cannot decide', () => {
    const broken: Store = {
      apply: (batch) =>
        Promise.resolve(
          batch.map(() => ({
            ok: false as const,
            error: new StoreError('SLUICE_ERR_STORE_UNAVAILABLE', 'down'),
          })),
        ),
      close: () => Promise.resolve(),
    };
    const throwing: Store = {
      apply: () => Promise.reject(new Error('socket closed')),
      close: () => Promise.resolve(),
    };

    it('closed denies with UNAVAILABLE (never OVER_LIMIT); open allows and says so', async () => {
      for (const store of [broken, throwing]) {
        const { limiter } = setup(
          [
            { name: 'strict', match: ['tenant'], rate: 1, failureMode: 'closed' },
            { name: 'lenient', match: ['user'], rate: 1, failureMode: 'open' },
          ],
          store,
        );
        expect(await limiter.check({ tenant: 'a' })).toMatchObject({
          allowed: false,
          status: 'UNAVAILABLE',
          decision: { policy: 'strict', path: 'fail-closed', status: 'UNAVAILABLE' },
        });
        expect(await limiter.check({ user: 'u' })).toMatchObject({
          allowed: true,
          status: 'OK',
          decision: { policy: 'lenient', path: 'fail-open', status: 'OK' },
        });
      }
    });
  });

  describe('invalid input gives a clear typed error', () => {
    const cases: [string, () => Promise<unknown>, string, RegExp][] = [];
    const { limiter } = setup();
    cases.push(
      [
        'negative cost',
        () => limiter.check(status, { cost: -1 }),
        'SLUICE_ERR_COST_INVALID',
        /cost must be a non-negative safe integer, got -1/,
      ],
      [
        'NaN cost',
        () => limiter.check(status, { cost: NaN }),
        'SLUICE_ERR_COST_INVALID',
        /got NaN/,
      ],
      [
        'fractional cost',
        () => limiter.check(status, { cost: 1.5 }),
        'SLUICE_ERR_COST_INVALID',
        /got 1.5/,
      ],
      [
        'huge cost',
        () => limiter.check(status, { cost: 2 ** 60 }),
        'SLUICE_ERR_COST_INVALID',
        /got 1152921504606847000/,
      ],
      [
        'cost above capacity',
        () => limiter.check(status, { cost: 21 }),
        'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
        /cost 21 exceeds the capacity 20 of policy "payments-tenant": it could never be admitted/,
      ],
      [
        'empty descriptor',
        () => limiter.check({}),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /invalid descriptor: it has no entries/,
      ],
      [
        'non-string value',
        () => limiter.check({ tenant: 42 } as never),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /value of "tenant" must be a string, got number/,
      ],
      [
        'duplicate key',
        () =>
          limiter.check([
            { key: 'tenant', value: 'a' },
            { key: 'tenant', value: 'b' },
          ]),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /key "tenant" appears more than once/,
      ],
      [
        'oversized value',
        () => limiter.check({ tenant: 'x'.repeat(1025) }),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /1025 characters long; the limit is 1024/,
      ],
      [
        'oversized key (the record fast path too)',
        () => limiter.check({ [`t${'k'.repeat(256)}`]: 'acme' }),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /entries\[0\] \(key "tk{63}…"\): key is 257 characters long; the limit is 256/,
      ],
      [
        'too many entries',
        () =>
          limiter.check(Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']))),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /the descriptor has 33 entries; the limit is 32/,
      ],
      [
        'lone surrogate',
        () => limiter.check({ tenant: '\ud800' }),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /lone UTF-16 surrogate/,
      ],
      [
        'not a descriptor',
        () => limiter.check('tenant=acme' as never),
        'SLUICE_ERR_DESCRIPTOR_INVALID',
        /expected an array of \{key, value\} entries or a record, got string/,
      ],
      [
        'unknown policy',
        () => limiter.check(status, { policies: ['nope'] }),
        'SLUICE_ERR_POLICY_UNKNOWN',
        /unknown policy "nope"; loaded: payments-tenant, transfers-per-tenant/,
      ],
      [
        'unmatched policy',
        () => limiter.check(status, { policies: ['transfers-per-tenant'] }),
        'SLUICE_ERR_DESCRIPTOR_UNMATCHED',
        /needs: tenant, route=POST \/transfers/,
      ],
    );
    for (const [name, call, code, message] of cases) {
      it(name, async () => {
        const e = await call().then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(e).toBeInstanceOf(PolicyError);
        expect((e as PolicyError).code).toBe(code);
        expect((e as PolicyError).status).toBe('INVALID_POLICY');
        expect((e as Error).message).toMatch(message);
      });
    }

    it('malformed policies passed to createLimiter', () => {
      expect(() =>
        createLimiter({
          store: new MemoryStore(),
          policies: [{ name: 'a', match: ['t'], rate: 'fast' }],
        }),
      ).toThrow(/\[0\]\.rate: expected a number, got "fast"/);
    });

    it('charges nothing when a check is rejected as invalid', async () => {
      const { limiter: l } = setup();
      await l.check(status, { cost: 21 }).catch(() => undefined);
      expect((await l.check(status, { cost: 0 })).decisions[0]!.remaining).toBe(20);
    });
  });
});

describe('Limiter: remembered descriptors', () => {
  const one: PolicyInput[] = [{ name: 'per-tenant', match: ['tenant'], rate: 1, burst: 2 }];

  it('charges a mutable record to the bucket of its values at each check', () => {
    const { limiter } = setup(one);
    const d: Record<string, string> = { tenant: 'a' };
    expect(limiter.checkSync(d).decision?.remaining).toBe(1);
    d['tenant'] = 'b';
    expect(limiter.checkSync(d).decision?.remaining).toBe(1);
    d['tenant'] = 'a';
    expect(limiter.checkSync(d).decision?.remaining).toBe(0);
  });

  it('reads a frozen record with a getter afresh at each check', () => {
    const { limiter } = setup(one);
    let tenant = 'a';
    const d = Object.freeze(
      Object.defineProperty({}, 'tenant', { get: () => tenant, enumerable: true }),
    ) as Readonly<Record<string, string>>;
    expect(limiter.checkSync(d).decision?.remaining).toBe(1);
    tenant = 'b';
    expect(limiter.checkSync(d).decision?.remaining).toBe(1);
    tenant = 'a';
    expect(limiter.checkSync(d).decision?.remaining).toBe(0);
  });

  it('resolves a frozen record again after setPolicies', async () => {
    const { limiter } = setup(one);
    const d = Object.freeze({ tenant: 'a', route: 'r' });
    expect(limiter.checkSync(d).decisions.map((x) => x.policy)).toEqual(['per-tenant']);
    limiter.setPolicies([...one, { name: 'per-route', match: ['route'], rate: 1, burst: 5 }]);
    expect((await limiter.check(d)).decisions.map((x) => x.policy)).toEqual([
      'per-tenant',
      'per-route',
    ]);
  });

  it('keeps deciding a frozen record after its bucket expired, was evicted or the store closed', async () => {
    const store = new MemoryStore({ maxKeys: 1 });
    const { clock, limiter } = setup(one, store);
    const a = Object.freeze({ tenant: 'a' });
    const b = Object.freeze({ tenant: 'b' });
    expect(limiter.checkSync(a).decision?.remaining).toBe(1);
    expect(limiter.checkSync(b).decision?.remaining).toBe(1); // evicts a
    expect(limiter.checkSync(a).decision?.remaining).toBe(1); // a starts full again
    expect(limiter.checkSync(a).decision?.remaining).toBe(0);
    clock.advance(10_000); // idle past the TTL: full again
    expect(limiter.checkSync(a).decision?.remaining).toBe(1);
    await store.close();
    const closed = limiter.checkSync(a);
    expect(closed.status).toBe('OK'); // failure mode open (the default)
    expect(closed.decision?.path).toBe('fail-open');
  });
});
