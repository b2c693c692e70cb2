import { describe, expect, it } from 'vitest';
import { parsePolicies } from '../../src/config/policies.js';
import type { Decision } from '../../src/core/decision.js';
import type { StageItem, StageOutcome } from '../../src/limiter/stage.js';
import { QuotaAgent } from '../../src/quota/agent.js';
import type { Lease } from '../../src/quota/lease.js';
import { LeaseStage } from '../../src/quota/lease-stage.js';
import { StageMetrics } from '../../src/metrics/stage-metrics.js';
import { sumOf } from '../support/prometheus-text.js';

const [leased, other] = parsePolicies([
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
    rate: 10,
    period: '1s',
    burst: 10,
  },
]).policies;
const lease: Lease = {
  agent: 'a',
  bucket: 'global-api',
  rate: 3,
  burst: 3,
  windowMs: 1_000,
  ttlMs: 3_000,
  version: 1,
  fencingToken: 1,
  issuedAtMs: 0,
};
const item = (cost = 1): StageItem => ({ policy: leased!, key: 'route=/', capacity: 1000, cost });
const outcome = (admitted: boolean): StageOutcome => ({ admitted, decision: {} as Decision });

function stageWith(fallback: QuotaAgent['options']['fallback']) {
  const agent = new QuotaAgent({ agent: 'a', bucket: 'global-api', fallback }, 0);
  agent.apply(lease, 0);
  return { agent, stage: new LeaseStage({ policies: ['global-api'], agentFor: () => agent }) };
}

describe('LeaseStage (path lease)', () => {
  it('takes part only in the policies given', () => {
    const { stage } = stageWith({ kind: 'deny' });
    expect(stage.name).toBe('lease');
    expect(stage.appliesTo(leased!)).toBe(true);
    expect(stage.appliesTo(other!)).toBe(false);
  });

  it('answers from the lease in process: its burst per window, then denied until the window ends', () => {
    const { stage } = stageWith({ kind: 'deny' });
    const answers = [0, 100, 200, 300].map((nowMs) => stage.enter(item(), { nowMs }));
    expect(answers.map((a) => a?.kind === 'answer' && a.decision.allowed)).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(answers[3]).toEqual({
      kind: 'answer',
      path: 'lease',
      decision: {
        status: 'OVER_LIMIT',
        allowed: false,
        limit: 3,
        remaining: 0,
        retryAfterMs: 700,
        resetAfterMs: 700,
      },
    });
    // What a caller sees of each: the lease's burst (3) less what this window used.
    expect(answers.map((a) => a?.kind === 'answer' && a.decision.remaining)).toEqual([2, 1, 0, 0]);
    expect(answers[0]).toEqual({
      kind: 'answer',
      path: 'lease',
      decision: {
        status: 'OK',
        allowed: true,
        limit: 3,
        remaining: 2,
        retryAfterMs: 0,
        resetAfterMs: 1_000,
      },
    });
    expect(answers[2]).toMatchObject({ decision: { status: 'OK', remaining: 0, retryAfterMs: 0 } });
  });

  it('reports each used window of a lease as granted, and admitted units as spent (StageRecorder)', async () => {
    const metrics = new StageMetrics();
    const agent = new QuotaAgent(
      { agent: 'a', bucket: 'global-api', fallback: { kind: 'static', rate: 50 } },
      0,
    );
    agent.apply(lease, 0);
    const stage = new LeaseStage({ policies: ['global-api'], agentFor: () => agent, metrics });
    // Window 0: two admitted, one whose check another policy denied; window 1: one admitted.
    // After the lease expires (3 s), the fallback's allowance is not granted.
    const run = (nowMs: number, admitted: boolean): void => {
      const verdict = stage.enter(item(), { nowMs });
      stage.settle(item(), verdict, outcome(admitted), { nowMs });
    };
    run(0, true);
    run(100, true);
    run(200, false);
    run(1_000, true);
    run(3_500, true);
    const t = await metrics.registry.metrics();
    const units = (name: string) => sumOf(t, name, { stage: 'lease', policy: 'global-api' });
    expect(units('sluice_stage_granted_units_total')).toBe(6);
    expect(units('sluice_stage_spent_units_total')).toBe(3);
  });

  it('counts a window granted again by what a raise mid-window adds, so spent never passes granted', async () => {
    const metrics = new StageMetrics();
    const agent = new QuotaAgent(
      { agent: 'a', bucket: 'global-api', fallback: { kind: 'deny' } },
      0,
    );
    agent.apply(lease, 0);
    const stage = new LeaseStage({ policies: ['global-api'], agentFor: () => agent, metrics });
    const run = (nowMs: number): boolean => {
      const verdict = stage.enter(item(), { nowMs });
      stage.settle(item(), verdict, outcome(true), { nowMs });
      return verdict?.kind === 'answer' && verdict.decision.allowed;
    };
    expect([0, 100, 200].map(run)).toEqual([true, true, true]);
    // A raise to 6 in the same window: three more fit before it ends.
    agent.apply({ ...lease, rate: 6, burst: 6, version: 2, issuedAtMs: 300 }, 300);
    const more = [400, 500, 600, 700].map(run);
    const t = await metrics.registry.metrics();
    const units = (name: string) => sumOf(t, name, { stage: 'lease', policy: 'global-api' });
    const granted = units('sluice_stage_granted_units_total');
    const spent = units('sluice_stage_spent_units_total');
    // The window's allowance went from 3 to 6: granted is 6 exactly (3, then the 3 the
    // raise added), and all 6 were spent.
    expect(more).toEqual([true, true, true, false]);
    expect(spent).toBe(6);
    expect(granted).toBe(6);
  });

  it('gives the units back when another policy denied the check', () => {
    const { stage, agent } = stageWith({ kind: 'deny' });
    const v = stage.enter(item(2), { nowMs: 0 });
    stage.settle(item(2), v, outcome(false), { nowMs: 0 });
    expect(agent.window(0).used).toBe(0);
    expect(agent.report(1_000).allowed).toBe(0);
    const kept = stage.enter(item(2), { nowMs: 1_000 });
    stage.settle(item(2), kept, outcome(true), { nowMs: 1_000 });
    expect(agent.window(1_000).used).toBe(2);
  });

  it('once the lease has expired, applies the fallback; `store` passes the item on', () => {
    const deny = stageWith({ kind: 'deny' }).stage;
    expect(deny.enter(item(), { nowMs: 3_000 })).toMatchObject({
      decision: { allowed: false, limit: 0 },
    });
    const store = stageWith({ kind: 'store' }).stage;
    expect(store.enter(item(), { nowMs: 2_999 })).toMatchObject({ decision: { allowed: true } });
    expect(store.enter(item(), { nowMs: 3_000 })).toBeUndefined();
  });
});
