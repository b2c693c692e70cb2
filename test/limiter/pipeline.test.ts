/**
 * The check pipeline through the public API: a check's items pass the limiter's stages in
 * order before the store (stage.ts). The stage here is a real one, a small local
 * allowance: units held in process per bucket key, spent by `enter` (an answer on the
 * `local` path), given back by `settle` when the check did not admit the request; keys it
 * was told to refuse are denied locally; otherwise it passes the item on, with its cost
 * scaled by `costFactor`. The store is a real MemoryStore that counts its calls.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { AlgorithmDecision } from '../../src/core/decision.js';
import type { PolicyInput } from '../../src/config/policies.js';
import type { Policy } from '../../src/core/policy.js';
import { PlanQuery, type Limiter } from '../../src/limiter/limiter.js';
import { createLimiter } from '../../src/local/create-limiter.js';
import type {
  Stage,
  StageContext,
  StageItem,
  StageOutcome,
  StageVerdict,
} from '../../src/limiter/stage.js';
import { parsePolicies } from '../../src/config/policies.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { Store, StoreApplyOptions, StoreRequest } from '../../src/stores/store.js';

const t0 = 1_700_000_000_000;

/** A MemoryStore that counts the batches it is asked to run, and their requests. */
class CountingStore extends MemoryStore {
  calls = 0;
  requests: { key: string; cost: number }[] = [];

  override apply(batch: readonly StoreRequest[], o: StoreApplyOptions) {
    this.calls += 1;
    for (const r of batch) this.requests.push({ key: r.key, cost: r.cost });
    return super.apply(batch, o);
  }
}

interface Settled {
  readonly policy: string;
  readonly verdict: string;
  readonly admitted: boolean;
  readonly path: string;
  readonly status: string;
  readonly error?: string;
}

/** A local allowance of units per bucket key (see the file comment). */
class LocalAllowance implements Stage {
  readonly name: string;
  readonly #policies: ReadonlySet<string>;
  readonly #units = new Map<string, number>();
  readonly #refuse = new Set<string>();
  /** Stages answering with a promise (as a stage doing remote work does). */
  remote = false;
  costFactor = 1;
  appliesToCalls = 0;
  closed = 0;
  readonly entered: string[] = [];
  readonly settled: Settled[] = [];

  constructor(name: string, policies: readonly string[]) {
    this.name = name;
    this.#policies = new Set(policies);
  }

  grant(key: string, units: number): void {
    this.#units.set(key, units);
  }

  refuse(key: string): void {
    this.#refuse.add(key);
  }

  unitsOf(key: string): number | undefined {
    return this.#units.get(key);
  }

  appliesTo(policy: Policy): boolean {
    this.appliesToCalls += 1;
    return this.#policies.has(policy.name);
  }

  enter(item: StageItem, ctx: StageContext): StageVerdict | Promise<StageVerdict> {
    this.entered.push(`${item.policy.name}@${ctx.nowMs - t0}`);
    const verdict = this.#verdict(item);
    return this.remote ? Promise.resolve(verdict) : verdict;
  }

  #verdict(item: StageItem): StageVerdict {
    const limit = item.capacity;
    if (this.#refuse.has(item.key)) {
      const decision: AlgorithmDecision = {
        status: 'OVER_LIMIT',
        allowed: false,
        limit,
        remaining: 0,
        retryAfterMs: 1_000,
        resetAfterMs: 1_000,
      };
      return { kind: 'answer', decision, path: 'local' };
    }
    const have = this.#units.get(item.key) ?? 0;
    if (have >= item.cost) {
      this.#units.set(item.key, have - item.cost);
      const decision: AlgorithmDecision = {
        status: 'OK',
        allowed: true,
        limit,
        remaining: have - item.cost,
        retryAfterMs: 0,
        resetAfterMs: 0,
      };
      return { kind: 'answer', decision, path: 'local' };
    }
    return this.costFactor === 1 ? undefined : { kind: 'pass', cost: item.cost * this.costFactor };
  }

  settle(item: StageItem, verdict: StageVerdict, outcome: StageOutcome): void {
    this.settled.push({
      policy: item.policy.name,
      verdict: verdict === undefined ? 'none' : verdict.kind,
      admitted: outcome.admitted,
      path: outcome.decision.path,
      status: outcome.decision.status,
      ...(outcome.error === undefined ? {} : { error: outcome.error.code }),
    });
    // Units spent for a request that was not admitted go back.
    if (!outcome.admitted && verdict?.kind === 'answer' && verdict.decision.allowed) {
      this.#units.set(item.key, (this.#units.get(item.key) ?? 0) + item.cost);
    }
  }

  close(): Promise<void> {
    this.closed += 1;
    return Promise.resolve();
  }
}

const tenant: PolicyInput = { name: 'tenant', match: ['tenant'], rate: 1, period: '1h', burst: 10 };
const route: PolicyInput = {
  name: 'route',
  match: ['tenant', 'route'],
  rate: 1,
  period: '1h',
  burst: 4,
};

function setup(
  policies: PolicyInput[],
  stages: Stage[],
  store = new CountingStore(),
): { limiter: Limiter; store: CountingStore; clock: ManualClock } {
  const clock = new ManualClock(t0);
  return { limiter: createLimiter({ store, policies, clock, stages }), store, clock };
}

/** The store's remaining units of a bucket, read with cost 0 through a limiter without stages. */
async function storeRemaining(
  store: MemoryStore,
  policies: PolicyInput[],
  d: object,
  name: string,
) {
  const reader = createLimiter({ store, policies, clock: new ManualClock(t0) });
  const r = await reader.check(d as Record<string, string>, { cost: 0, policies: [name] });
  return r.decisions[0]!.remaining;
}

describe('check pipeline: stages before the store', () => {
  it('answers from a stage on its path without calling the store; passes on to the store otherwise', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant], [local]);
    local.grant('{acme}:tenant', 2);
    for (const sync of [false, true]) {
      const r = sync
        ? limiter.checkSync({ tenant: 'acme' })
        : await limiter.check({ tenant: 'acme' });
      expect(r).toMatchObject({ allowed: true, status: 'OK' });
      expect(r.decisions).toEqual([
        expect.objectContaining({ policy: 'tenant', path: 'local', remaining: sync ? 0 : 1 }),
      ]);
    }
    expect(store.calls).toBe(0);
    // The allowance is spent: the stage passes the item on, and the store decides.
    const r = await limiter.check({ tenant: 'acme' });
    expect(r.decisions[0]).toMatchObject({ path: 'store', remaining: 9 });
    expect(store.calls).toBe(1);
    expect(local.settled.map((s) => [s.verdict, s.admitted, s.path])).toEqual([
      ['answer', true, 'local'],
      ['answer', true, 'local'],
      ['none', true, 'store'],
    ]);
  });

  it('denies the check when a stage denies an enforced item: the store is not called', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant, route], [local]);
    local.refuse('{acme}:tenant');
    const r = limiter.checkSync({ tenant: 'acme', route: 'GET /a' });
    expect(r).toMatchObject({ allowed: false, status: 'OVER_LIMIT', retryAfterMs: 1_000 });
    expect(r.decision).toMatchObject({ policy: 'tenant', path: 'local', allowed: false });
    // The other policy never reached the store: nothing known, nothing claimed.
    expect(r.decisions[1]).toMatchObject({ policy: 'route', allowed: true, remaining: 0 });
    expect(store.calls).toBe(0);
    expect(store.stats().keys).toBe(0);
    expect(local.settled).toEqual([
      { policy: 'tenant', verdict: 'answer', admitted: false, path: 'local', status: 'OVER_LIMIT' },
    ]);
  });

  it('settles a unit a stage spent as not admitted when another policy denies the all-or-nothing check, and the stage gives it back', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant, route], [local]);
    local.grant('{acme}:tenant', 100);
    const d = { tenant: 'acme', route: 'GET /a' };
    for (let i = 0; i < 4; i++) expect(limiter.checkSync(d).allowed).toBe(true);
    expect(local.unitsOf('{acme}:tenant')).toBe(96);
    const denied = limiter.checkSync(d); // the route bucket (burst 4) is empty
    expect(denied).toMatchObject({ allowed: false, status: 'OVER_LIMIT' });
    expect(denied.decision).toMatchObject({ policy: 'route', path: 'store' });
    expect(denied.decisions[0]).toMatchObject({ policy: 'tenant', path: 'local', allowed: true });
    expect(local.settled.at(-1)).toEqual({
      policy: 'tenant',
      verdict: 'answer',
      admitted: false,
      path: 'local',
      status: 'OK',
    });
    expect(local.unitsOf('{acme}:tenant')).toBe(96); // given back
    // Only the route policy went to the store, once per check.
    expect(store.calls).toBe(5);
    expect(new Set(store.requests.map((r) => r.key))).toEqual(new Set(['{acme}:route:GET%20%2Fa']));
  });

  it('passes an item on with the cost a stage changed it to', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    local.costFactor = 3;
    const { limiter, store } = setup([tenant], [local]);
    const r = await limiter.check({ tenant: 'acme' }, { cost: 2 });
    expect(r.decisions[0]).toMatchObject({ path: 'store', remaining: 4 }); // 10 - 2*3
    expect(store.requests).toEqual([{ key: '{acme}:tenant', cost: 6 }]);
  });

  it('runs stages in order: an answer from the first ends the item there', async () => {
    const first = new LocalAllowance('first', ['tenant']);
    const second = new LocalAllowance('second', ['tenant']);
    second.costFactor = 2;
    const { limiter, store } = setup([tenant], [first, second]);
    first.grant('{a}:tenant', 1);
    await limiter.check({ tenant: 'a' });
    expect([first.entered.length, second.entered.length, store.calls]).toEqual([1, 0, 0]);
    await limiter.check({ tenant: 'a' }); // first passes (none left), second doubles the cost
    expect([first.entered.length, second.entered.length]).toEqual([2, 1]);
    expect(store.requests).toEqual([{ key: '{a}:tenant', cost: 2 }]);
    expect(first.settled.map((s) => s.path)).toEqual(['local', 'store']);
    expect(second.settled.map((s) => s.path)).toEqual(['store']);
  });

  it('never blocks on a shadow policy a stage denies', async () => {
    const local = new LocalAllowance('local', ['watch']);
    const watch: PolicyInput = { ...tenant, name: 'watch', shadow: true };
    const { limiter, store } = setup([tenant, watch], [local]);
    local.refuse('{acme}:watch');
    const r = await limiter.check({ tenant: 'acme' });
    expect(r).toMatchObject({ allowed: true, status: 'OK' });
    expect(r.decisions[1]).toMatchObject({ policy: 'watch', allowed: false, path: 'shadow' });
    expect(r.decisions[0]).toMatchObject({ policy: 'tenant', path: 'store', remaining: 9 });
    expect(store.calls).toBe(1);
    expect(local.settled).toEqual([
      { policy: 'watch', verdict: 'answer', admitted: true, path: 'shadow', status: 'OVER_LIMIT' },
    ]);
  });

  it("settles with the store's error when the store fails and the failure mode decides", async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const open: PolicyInput = { ...tenant, failureMode: 'open' };
    const { limiter, store } = setup([open], [local]);
    await store.close(); // a closed MemoryStore answers every request with an error
    const r = await limiter.check({ tenant: 'acme' });
    expect(r.decisions[0]).toMatchObject({ allowed: true, path: 'fail-open' });
    expect(local.settled).toEqual([
      {
        policy: 'tenant',
        verdict: 'none',
        admitted: true,
        path: 'fail-open',
        status: 'OK',
        error: 'SLUICE_ERR_STORE_CLOSED',
      },
    ]);
  });

  it('waits for a stage that answers with a promise in check(); checkSync throws a TypeError naming it', async () => {
    const lease = new LocalAllowance('lease', ['tenant']);
    lease.remote = true;
    const { limiter, store } = setup([tenant], [lease]);
    lease.grant('{acme}:tenant', 1);
    const r = await limiter.check({ tenant: 'acme' });
    expect(r.decisions[0]).toMatchObject({ path: 'local', allowed: true });
    expect(() => limiter.checkSync({ tenant: 'acme' })).toThrow(
      new TypeError(
        'Limiter.checkSync: stage "lease" answered with a promise (it needs remote work); use check()',
      ),
    );
    // The stage that was entered is settled: nothing was admitted.
    expect(lease.settled.at(-1)).toMatchObject({ verdict: 'none', admitted: false });
    expect(store.calls).toBe(0);
  });

  it('asks appliesTo once per policy set, keeps its stages across policy reloads, and closes them', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant, route], [local]);
    expect(local.appliesToCalls).toBe(2);
    for (let i = 0; i < 5; i++) limiter.checkSync({ tenant: 'acme', route: 'GET /a' });
    expect(local.appliesToCalls).toBe(2);
    // Only the tenant policy's items entered: route pays nothing for the stage.
    expect(new Set(local.entered.map((e) => e.split('@')[0]))).toEqual(new Set(['tenant']));
    limiter.setPolicies([{ ...route, name: 'tenant', match: ['tenant', 'route'] }]);
    expect(local.appliesToCalls).toBe(3);
    local.refuse('{acme}:tenant:GET%20%2Fa');
    expect(limiter.checkSync({ tenant: 'acme', route: 'GET /a' })).toMatchObject({
      allowed: false,
      decision: { path: 'local' },
    });
    expect(store.calls).toBe(5);
    expect(limiter.stages).toEqual([local]);
    await limiter.close();
    expect(local.closed).toBe(1);
  });

  it('decides the items of independent plans on their own: a stage denial blocks only its item', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant], [local]);
    const [policy] = parsePolicies([tenant]).policies;
    local.refuse('{a}:tenant');
    const spec = { policy: policy!, name: policy!.name, independent: true };
    const r = await limiter.checkAt(
      t0,
      new PlanQuery().add(spec, { tenant: 'a' }, 1).add(spec, { tenant: 'b' }, 1),
    );
    expect(r.decisions.map((d) => [d.allowed, d.path])).toEqual([
      [false, 'local'],
      [true, 'store'],
    ]);
    expect(store.requests).toEqual([{ key: '{b}:tenant', cost: 1 }]);
    expect(local.settled.map((s) => [s.verdict, s.admitted])).toEqual([
      ['answer', false],
      ['none', true],
    ]);
  });

  it('refuses stages that are not stages, naming the index', () => {
    expect(() =>
      createLimiter({
        store: new MemoryStore(),
        policies: [tenant],
        stages: [{ name: 'x' } as never],
      }),
    ).toThrow(
      new TypeError('Limiter: stages[0] is not a stage (it needs a name, appliesTo() and enter())'),
    );
  });

  it('leaves the remaining units of a policy no stage applies to in the store', async () => {
    const local = new LocalAllowance('local', ['tenant']);
    const { limiter, store } = setup([tenant, route], [local]);
    local.grant('{acme}:tenant', 5);
    await limiter.check({ tenant: 'acme', route: 'GET /a' });
    expect(
      await storeRemaining(store, [tenant, route], { tenant: 'acme', route: 'GET /a' }, 'route'),
    ).toBe(3);
    expect(await storeRemaining(store, [tenant, route], { tenant: 'acme' }, 'tenant')).toBe(10);
  });

  it('never lets a later check change the items of a store call that outlived its deadline', async () => {
    // A remote store reads its requests when it gets to them: here, only once the gate
    // opens, after both checks gave up waiting (timeout 20ms).
    const inner = new MemoryStore();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const late: Promise<unknown>[] = [];
    const remote: Store = {
      apply: (batch, o) => {
        const applied = gate.then(() => inner.apply(batch, o));
        late.push(applied);
        return applied;
      },
      close: () => inner.close(),
    };
    const policy: PolicyInput = { ...tenant, timeout: '20ms', failureMode: 'closed' };
    const limiter = createLimiter({
      store: remote,
      policies: [policy],
      clock: new ManualClock(t0),
    });
    for (const t of ['a', 'b']) {
      expect(await limiter.check({ tenant: t })).toMatchObject({ status: 'UNAVAILABLE' });
    }
    open();
    await Promise.all(late);
    // Each timed-out consume was applied to its own bucket, once.
    expect(await storeRemaining(inner, [tenant], { tenant: 'a' }, 'tenant')).toBe(9);
    expect(await storeRemaining(inner, [tenant], { tenant: 'b' }, 'tenant')).toBe(9);
  });
});
