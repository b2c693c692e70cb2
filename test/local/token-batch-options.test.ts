import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import { ManualClock } from '../../src/core/clock.js';
import type { StageVerdict } from '../../src/limiter/stage.js';
import type { StageRecorder } from '../../src/metrics/stage-metrics.js';
import { TokenBatchStage } from '../../src/local/token-batch.js';
import { MemoryStore } from '../../src/stores/memory/memory-store.js';
import { batchPolicy as policy } from './support/batch-policy.js';
import { gatewayOf, stageCheck } from './support/stage-check.js';

const KEY = '{t1}:api';
describe('TokenBatchStage options and scope', () => {
  it('refuses maxKeys below 1 and a negative retryAfterFailureMs, naming the value; 1 and 0 are fine', () => {
    const refused = (o: ConstructorParameters<typeof TokenBatchStage>[0], message: string) =>
      expect(() => new TokenBatchStage(o)).toThrow(
        expect.objectContaining({ code: 'SLUICE_ERR_BATCH_INVALID', message }),
      );
    refused({ maxKeys: 0 }, 'batch stage: maxKeys must be a positive whole number; got 0');
    refused({ maxKeys: 2.5 }, 'batch stage: maxKeys must be a positive whole number; got 2.5');
    refused(
      { retryAfterFailureMs: -1 },
      'batch stage: retryAfterFailureMs must be a non-negative number; got -1',
    );
    refused(
      { retryAfterFailureMs: Number.NaN },
      'batch stage: retryAfterFailureMs must be a non-negative number; got NaN',
    );
    expect(new TokenBatchStage({ maxKeys: 1, retryAfterFailureMs: 0 }).unitsHeld).toBe(0);
  });

  it('takes part only in enforced policies that batch', () => {
    const stage = new TokenBatchStage();
    expect(stage.appliesTo(policy())).toBe(true);
    // The policy check refuses batch with shadow; a Policy built in code is refused here too.
    expect(stage.appliesTo({ ...policy(), shadow: true })).toBe(false);
    expect(
      stage.appliesTo(parsePolicies([{ name: 'x', match: ['t'], rate: 1 }]).policies[0]!),
    ).toBe(false);
  });

  it("tells the recorder what close gives back, as stage 'batch' of the policy", async () => {
    const seen: string[] = [];
    const metrics: StageRecorder = {
      granted: (s, p, n) => seen.push(`granted ${s} ${p} ${n}`),
      spent: (s, p, n) => seen.push(`spent ${s} ${p} ${n}`),
      returned: (s, p, n) => seen.push(`returned ${s} ${p} ${n}`),
      overshoot: (s, p, n) => seen.push(`overshoot ${s} ${p} ${n}`),
    };
    const stage = new TokenBatchStage({ clock: new ManualClock(0), metrics });
    const store = new MemoryStore();
    for (let i = 0; i < 4; i++) await stageCheck([stage], store, policy(), KEY, 1, { nowMs: 0 });
    seen.length = 0;
    await stage.close();
    expect(seen).toEqual(['returned batch api 3']); // reserved 1 + 2 + 4, spent 4
  });

  it('tells the recorder the units under the name the check knows the policy by', async () => {
    const seen: string[] = [];
    const metrics: StageRecorder = {
      granted: (s, p, n) => seen.push(`granted ${s} ${p} ${n}`),
      spent: (s, p, n) => seen.push(`spent ${s} ${p} ${n}`),
      returned: (s, p, n) => seen.push(`returned ${s} ${p} ${n}`),
      overshoot: (s, p, n) => seen.push(`overshoot ${s} ${p} ${n}`),
    };
    const stage = new TokenBatchStage({ clock: new ManualClock(0), metrics });
    const store = new MemoryStore();
    const ctx = { nowMs: 0, gateway: gatewayOf(store) };
    // An envoy rule's public name for the policy it compiles to (StageItem.name).
    const item = { policy: policy(), name: 'rule-7', key: KEY, capacity: 1_000, cost: 1 };
    for (let i = 0; i < 2; i++) {
      const verdict = await stage.enter(item, ctx);
      stage.settle(
        item,
        verdict,
        { admitted: true, decision: { ...okOf(verdict), policy: 'rule-7', path: 'batch' } },
        ctx,
      );
    }
    await stage.close();
    expect(seen).toEqual([
      'granted batch rule-7 1',
      'spent batch rule-7 1',
      'granted batch rule-7 2',
      'spent batch rule-7 1',
      'returned batch rule-7 1',
    ]);
  });

  it('after close, checks go to the store and nothing more is reserved', async () => {
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    const store = new MemoryStore();
    await stage.close();
    const d = await stageCheck([stage], store, policy(), KEY, 1, { nowMs: 0 });
    expect([d.allowed, d.path]).toEqual([true, 'store']);
    expect([stage.stats.reservationCalls, stage.unitsHeld]).toEqual([0, 0]);
  });

  it('a check denied elsewhere gives its units back only while the reserve lives', async () => {
    const stage = new TokenBatchStage({ clock: new ManualClock(0) });
    const store = new MemoryStore();
    const p = policy();
    for (let i = 0; i < 4; i++) await stageCheck([stage], store, p, KEY, 1, { nowMs: 0 });
    expect(stage.unitsHeld).toBe(3);
    const item = { policy: p, key: KEY, capacity: 1_000, cost: 1 };
    const ctx = (nowMs: number) => ({ nowMs, gateway: gatewayOf(store) });
    const verdict = stage.enter(item, ctx(0));
    expect(verdict).toMatchObject({ kind: 'answer', path: 'batch' });
    const denied = {
      admitted: false,
      decision: {
        policy: 'other',
        path: 'store' as const,
        status: 'OVER_LIMIT' as const,
        allowed: false,
        limit: 1,
        remaining: 0,
        retryAfterMs: 10,
        resetAfterMs: 10,
      },
    };
    // Taken (2 left), then denied by another policy: the unit goes back (3).
    stage.settle(item, verdict as StageVerdict, denied, ctx(0));
    expect(stage.unitsHeld).toBe(3);
    // A denial told after the reserve's ttl puts nothing back.
    const late = stage.enter(item, ctx(999));
    expect(stage.unitsHeld).toBe(2);
    stage.settle(item, late as StageVerdict, denied, ctx(1_000));
    expect(stage.unitsHeld).toBe(2);
  });
});

function okOf(verdict: StageVerdict) {
  if (verdict?.kind !== 'answer') throw new Error('expected an answer from the reserve');
  return verdict.decision;
}
