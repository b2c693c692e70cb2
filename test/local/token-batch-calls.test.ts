import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { StoreError } from '../../src/core/errors.js';
import type { ErrorCode } from '../../src/core/error-codes.js';
import type { Policy } from '../../src/core/policy.js';
import type { StageContext, StageGateway, StageOutcome } from '../../src/limiter/stage.js';
import type { StageRecorder } from '../../src/metrics/stage-metrics.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import type { StoreRequest, StoreResult } from '../../src/stores/store.js';
import { batchPolicy, KEY } from './support/batch-policy.js';
import { HeldStore } from './support/held-store.js';
import { gatewayOf } from './support/stage-check.js';

/**
 * The stage's own store calls (token-batch.ts `#reserveCall`, `#giveBack`) and the items
 * it passes on untouched, through a gateway the test scripts: each apply fails with the
 * next code of `fails` until they run out, then goes to a MemoryStore. No timers.
 */
class ScriptedGateway implements StageGateway {
  readonly inner = new MemoryStore();
  applies = 0;
  refundCalls = 0;
  constructor(
    private readonly fails: ErrorCode[] = [],
    private readonly refunds: 'ok' | 'fail' | 'none' = 'ok',
  ) {}
  apply(
    batch: readonly StoreRequest[],
    _timeoutMs: number,
    ctx: StageContext,
    requestId?: string,
  ): Promise<readonly StoreResult[]> {
    this.applies++;
    const code = this.fails.shift();
    if (code !== undefined) return Promise.resolve(failed(batch, code));
    return Promise.resolve(
      this.inner.apply(batch, { nowMs: ctx.nowMs, ...(requestId ? { requestId } : {}) }),
    );
  }
  refund(batch: readonly StoreRequest[]): Promise<readonly StoreResult[]> | undefined {
    this.refundCalls++;
    if (this.refunds === 'none') return undefined;
    if (this.refunds === 'fail')
      return Promise.resolve(failed(batch, 'SLUICE_ERR_STORE_UNAVAILABLE'));
    return Promise.resolve(batch.map(() => ({ ok: true as const, decision: okDecision })));
  }
}

const okDecision = {
  status: 'OK' as const,
  allowed: true,
  limit: 1_000,
  remaining: 1_000,
  retryAfterMs: 0,
  resetAfterMs: 0,
};

function failed(batch: readonly StoreRequest[], code: ErrorCode): StoreResult[] {
  return batch.map(() => ({ ok: false as const, error: new StoreError(code, 'scripted') }));
}

const deniedElsewhere: StageOutcome = {
  admitted: false,
  decision: { ...okDecision, status: 'OVER_LIMIT', allowed: false, policy: 'other', path: 'store' },
};

function item(p: Policy, cost: number) {
  return { policy: p, key: KEY, capacity: 1_000, cost };
}

const TIMEOUT: ErrorCode = 'SLUICE_ERR_STORE_TIMEOUT';

describe('TokenBatchStage reservation calls', () => {
  it('retries a timed-out reservation once: a second timeout passes the item on', async () => {
    const gateway = new ScriptedGateway([TIMEOUT, TIMEOUT, TIMEOUT]);
    const stage = new TokenBatchStage();
    expect(await stage.enter(item(batchPolicy(), 1), { nowMs: 0, gateway })).toBeUndefined();
    expect([gateway.applies, stage.stats.reservationCalls]).toEqual([2, 2]);
  });

  it('retries only a timeout, not a failure the store reported', async () => {
    const gateway = new ScriptedGateway(['SLUICE_ERR_STORE_UNAVAILABLE']);
    const stage = new TokenBatchStage();
    expect(await stage.enter(item(batchPolicy(), 1), { nowMs: 0, gateway })).toBeUndefined();
    expect(gateway.applies).toBe(1);
  });

  it("retries within the caller's budget, and not once it is spent or the caller cancelled", async () => {
    const p = batchPolicy();
    const once = async (ctx: Omit<StageContext, 'gateway' | 'nowMs'>) => {
      const gateway = new ScriptedGateway([TIMEOUT]);
      const stage = new TokenBatchStage();
      const v = await stage.enter(item(p, 1), { ...ctx, nowMs: 0, gateway });
      return [v?.kind ?? 'passed on', stage.stats.reservationCalls];
    };
    expect(await once({})).toEqual(['answer', 2]);
    expect(await once({ deadlineAtMs: performance.now() + 3_600_000 })).toEqual(['answer', 2]);
    expect(await once({ deadlineAtMs: performance.now() - 1 })).toEqual(['passed on', 1]);
    expect(await once({ signal: AbortSignal.abort() })).toEqual(['passed on', 1]);
  });

  it('counts every item answered from a reserve', async () => {
    const gateway = new ScriptedGateway();
    const stage = new TokenBatchStage();
    for (let i = 0; i < 10; i++) await stage.enter(item(batchPolicy(), 1), { nowMs: 0, gateway });
    expect(stage.stats).toMatchObject({ answered: 10, reservationCalls: 4 });
  });
});

describe('TokenBatchStage, items it passes on untouched', () => {
  it('passes on, reserving nothing, an item entered outside a limiter, of cost 0, or of a policy without batch', async () => {
    const store = new HeldStore();
    const stage = new TokenBatchStage();
    const ctx = { nowMs: 0, gateway: gatewayOf(store) };
    const plain = { ...batchPolicy() };
    delete (plain as { batch?: unknown }).batch;
    expect(await stage.enter(item(batchPolicy(), 1), { nowMs: 0 })).toBeUndefined();
    expect(await stage.enter(item(batchPolicy(), 0), ctx)).toBeUndefined();
    expect(await stage.enter(item(plain, 1), ctx)).toBeUndefined();
    expect(store.costs).toEqual([]);
    expect(stage.stats.reservationCalls).toBe(0);
  });
});

describe('TokenBatchStage.close refunds', () => {
  it("gives back no more than the last reservation's units, though denied checks put more back", async () => {
    const gateway = new ScriptedGateway();
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    const p = batchPolicy();
    // Reserves 1, then 2: three checks spend the 3.
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push(await stage.enter(item(p, 1), { nowMs: 0, gateway }));
    // All three denied elsewhere: 3 units back in the reserve, 1 of them from the first
    // reservation, whose id close does not give back under.
    for (const v of verdicts) stage.settle(item(p, 1), v, deniedElsewhere, { nowMs: 0 });
    expect(stage.unitsHeld).toBe(3);
    await stage.close();
    expect(stage.stats.unitsReturned).toBe(2);
    expect(stage.unitsHeld).toBe(0);
  });

  it('asks no refund for a reserve spent to the last unit', async () => {
    const gateway = new ScriptedGateway();
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    for (let i = 0; i < 3; i++) await stage.enter(item(batchPolicy(), 1), { nowMs: 0, gateway });
    expect(stage.unitsHeld).toBe(0);
    await stage.close();
    expect([gateway.refundCalls, stage.stats.unitsReturned]).toEqual([0, 0]);
  });

  it('gives nothing back, and tells no recorder, when the store cannot refund or its refund fails', async () => {
    for (const refunds of ['none', 'fail'] as const) {
      const seen: string[] = [];
      const metrics: StageRecorder = {
        granted: () => undefined,
        spent: () => undefined,
        returned: (s, p, n) => seen.push(`returned ${s} ${p} ${n}`),
        overshoot: () => undefined,
      };
      const gateway = new ScriptedGateway([], refunds);
      const stage = new TokenBatchStage({ clock: new ManualClock(0), metrics });
      for (let i = 0; i < 2; i++) await stage.enter(item(batchPolicy(), 1), { nowMs: 0, gateway });
      expect(stage.unitsHeld).toBe(1);
      await stage.close();
      expect([stage.stats.unitsReturned, stage.unitsHeld, seen]).toEqual([0, 0, []]);
    }
  });
});
