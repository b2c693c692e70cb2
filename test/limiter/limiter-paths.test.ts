/**
 * A check takes one of several internal paths depending on the descriptor's form, the
 * store and how many policies match (a record matching one policy on a MemoryStore is
 * decided by its value alone; a frozen record is resolved once; an entry list or named
 * policies take the general path; a store that answers with a promise gets a deadline). Every path
 * must validate the same way and decide the same way: these tables run each case on each.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { PolicyError } from '../../src/core/errors.js';
import type { DescriptorInput } from '../../src/core/descriptor.js';
import { type CheckOptions, type Limiter } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import type { PolicyInput } from '../../src/config/policies.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { Store } from '../../src/stores/store.js';

const t0 = 1_700_000_000_000;
const p: PolicyInput = { name: 'p', match: ['t'], rate: 1, burst: 5 };
const q: PolicyInput = { name: 'q', match: ['t'], rate: 1, burst: 9 };

/** A MemoryStore reached only through `apply`, as a remote store is. */
function asyncStore(): Store {
  const inner = new MemoryStore();
  return {
    apply: (batch, o) => Promise.resolve(inner.apply(batch, o)),
    close: () => inner.close(),
  };
}

interface Path {
  readonly name: string;
  readonly policies: PolicyInput[];
  readonly store: () => Store;
  readonly descriptor: () => DescriptorInput;
  readonly options?: CheckOptions;
}

const paths: readonly Path[] = [
  {
    name: 'record, one policy (value index)',
    policies: [p],
    store: () => new MemoryStore(),
    descriptor: () => ({ t: 'a' }),
  },
  {
    name: 'frozen record (remembered)',
    policies: [p],
    store: () => new MemoryStore(),
    descriptor: () => Object.freeze({ t: 'a' }),
  },
  {
    name: 'record, two policies',
    policies: [p, q],
    store: () => new MemoryStore(),
    descriptor: () => ({ t: 'a' }),
  },
  {
    name: 'entry list',
    policies: [p],
    store: () => new MemoryStore(),
    descriptor: () => [{ key: 't', value: 'a' }],
  },
  {
    name: 'named policy',
    policies: [p, q],
    store: () => new MemoryStore(),
    descriptor: () => ({ t: 'a' }),
    options: { policies: ['p'] },
  },
  {
    name: 'store answering with a promise',
    policies: [p],
    store: asyncStore,
    descriptor: () => ({ t: 'a' }),
  },
];

/** A limiter for the path, its descriptor already resolved once (so frozen ones are remembered). */
async function limiterFor(path: Path): Promise<{ limiter: Limiter; d: DescriptorInput }> {
  const limiter = createLimiter({
    store: path.store(),
    policies: path.policies,
    clock: new ManualClock(t0),
  });
  const d = path.descriptor();
  await limiter.check(d, { ...path.options, cost: 0 });
  return { limiter, d };
}

const rejected: [string, CheckOptions, string, RegExp][] = [
  ['cost -1', { cost: -1 }, 'SLUICE_ERR_COST_INVALID', /non-negative safe integer, got -1$/],
  ['cost 1.5', { cost: 1.5 }, 'SLUICE_ERR_COST_INVALID', /got 1.5$/],
  ['cost "2"', { cost: '2' as never }, 'SLUICE_ERR_COST_INVALID', /got string$/],
  [
    'cost above the capacity',
    { cost: 6 },
    'SLUICE_ERR_COST_EXCEEDS_CAPACITY',
    /^cost 6 exceeds the capacity 5 of policy "p": it could never be admitted$/,
  ],
  ['timeoutMs 0', { timeoutMs: 0 }, 'SLUICE_ERR_TIMEOUT_INVALID', /positive number of ms, got 0$/],
  ['timeoutMs -5', { timeoutMs: -5 }, 'SLUICE_ERR_TIMEOUT_INVALID', /got -5$/],
  ['timeoutMs NaN', { timeoutMs: NaN }, 'SLUICE_ERR_TIMEOUT_INVALID', /got NaN$/],
  ['empty requestId', { requestId: '' }, 'SLUICE_ERR_REQUEST_ID_INVALID', /got 0 characters$/],
  [
    '129-character requestId',
    { requestId: 'r'.repeat(129) },
    'SLUICE_ERR_REQUEST_ID_INVALID',
    /^requestId must be a non-empty, well-formed string of at most 128 characters, got 129 characters$/,
  ],
  [
    'requestId with a lone surrogate',
    { requestId: 'a\ud800' },
    'SLUICE_ERR_REQUEST_ID_INVALID',
    /got 2 characters$/,
  ],
  ['numeric requestId', { requestId: 42 as never }, 'SLUICE_ERR_REQUEST_ID_INVALID', /got number$/],
];

describe.each(paths)('Limiter path: $name', (path) => {
  it.each(rejected)('rejects %s with a typed error', async (_name, options, code, message) => {
    const { limiter, d } = await limiterFor(path);
    const error = await limiter.check(d, { ...path.options, ...options }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PolicyError);
    expect(error).toMatchObject({ code });
    expect((error as Error).message).toMatch(message);
    // nothing was charged
    const after = await limiter.check(d, { ...path.options, cost: 0 });
    expect(after.decisions.find((x) => x.policy === 'p')?.remaining).toBe(5);
  });

  it('accepts a cost equal to the capacity, a 128-character requestId and any positive timeout', async () => {
    const { limiter, d } = await limiterFor(path);
    const r = await limiter.check(d, {
      ...path.options,
      cost: 5,
      requestId: 'r'.repeat(128),
      timeoutMs: 0.5,
    });
    expect(r).toMatchObject({ allowed: true, status: 'OK' });
    expect(r.decisions.find((x) => x.policy === 'p')?.remaining).toBe(0);
    const denied = await limiter.check(d, { ...path.options, cost: 1 });
    expect(denied).toMatchObject({
      allowed: false,
      status: 'OVER_LIMIT',
      retryAfterMs: 1_000,
      decision: { policy: 'p', path: 'store', limit: 5, remaining: 0, retryAfterMs: 1_000 },
    });
  });

  it('gives a shadow policy the shadow path: it decides but never blocks', async () => {
    const limiter = createLimiter({
      store: path.store(),
      policies: path.policies.map((x) => ({ ...x, shadow: true })),
      clock: new ManualClock(t0),
    });
    const d = path.descriptor();
    await limiter.check(d, { ...path.options, cost: 5 });
    const r = await limiter.check(d, { ...path.options, cost: 1 });
    expect(r).toMatchObject({ allowed: true, status: 'OK', decision: undefined });
    expect(r.decisions.find((x) => x.policy === 'p')).toMatchObject({
      allowed: false,
      status: 'OVER_LIMIT',
      path: 'shadow',
    });
  });

  it('fails closed with an UNAVAILABLE decision that is not allowed, once the store is closed', async () => {
    const store = path.store();
    const limiter = createLimiter({
      store,
      policies: path.policies.map((x) => ({ ...x, failureMode: 'closed' })),
      clock: new ManualClock(t0),
    });
    const d = path.descriptor();
    await limiter.check(d, path.options);
    await store.close();
    const r = await limiter.check(d, path.options);
    expect(r).toMatchObject({ allowed: false, status: 'UNAVAILABLE' });
    expect(r.decisions.find((x) => x.policy === 'p')).toEqual({
      status: 'UNAVAILABLE',
      allowed: false,
      limit: 5,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 0,
      policy: 'p',
      path: 'fail-closed',
    });
  });
});

describe.each(paths)('Limiter path, store closed: $name', (path) => {
  it.each(['open', 'closed'] as const)(
    'answers a shadow policy (failure mode %s) on the shadow path, allowed',
    async (failureMode) => {
      const store = path.store();
      const limiter = createLimiter({
        store,
        policies: path.policies.map((x) => ({ ...x, shadow: true, failureMode })),
        clock: new ManualClock(t0),
      });
      await store.close();
      const r = await limiter.check(path.descriptor(), path.options);
      expect(r).toMatchObject({ allowed: true, status: 'OK', decision: undefined });
      expect(r.decisions.find((x) => x.policy === 'p')).toMatchObject({
        status: 'OK',
        allowed: true,
        remaining: 0,
        path: 'shadow',
      });
    },
  );
});

describe('Limiter paths: cost rules', () => {
  const policies: PolicyInput[] = [
    {
      name: 'p',
      match: ['t'],
      rate: 1,
      burst: 20,
      cost: { rules: [{ when: { route: 'POST /x', method: 'POST' }, cost: 5 }], default: 2 },
    },
  ];
  it.each([
    ['record', (d: Record<string, string>) => d],
    [
      'entry list',
      (d: Record<string, string>) => Object.entries(d).map(([key, value]) => ({ key, value })),
    ],
  ])('apply a rule only when every condition holds (%s)', async (_name, form) => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      policies,
      clock: new ManualClock(t0),
    });
    const charged = async (d: Record<string, string>) =>
      20 - (await limiter.check(form({ t: 'x', ...d }))).decisions[0]!.remaining - spent;
    let spent = 0;
    const expectCharge = async (d: Record<string, string>, cost: number) => {
      expect(await charged(d)).toBe(cost);
      spent += cost;
    };
    await expectCharge({ route: 'POST /x', method: 'GET' }, 2);
    await expectCharge({ route: 'GET /x', method: 'POST' }, 2);
    await expectCharge({ route: 'POST /x' }, 2);
    await expectCharge({ route: 'POST /x', method: 'POST' }, 5);
  });
});

describe('Limiter paths: descriptors that are not records', () => {
  it.each([
    ['null', null],
    ['a number', 7],
  ])('rejects %s with a PolicyError', async (_name, descriptor) => {
    const limiter = createLimiter({ store: new MemoryStore(), policies: [p] });
    await expect(limiter.check(descriptor as never)).rejects.toMatchObject({
      name: 'PolicyError',
      code: 'SLUICE_ERR_DESCRIPTOR_INVALID',
    });
  });
});
