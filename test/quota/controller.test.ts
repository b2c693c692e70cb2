import { describe, expect, it } from 'vitest';
import { QuotaAgent } from '../../src/quota/agent.js';
import { pacedSharesBound, partitionBound, partitionBoundSection } from '../../src/quota/bounds.js';
import { QuotaController } from '../../src/quota/controller.js';
import type { UsageReport } from '../../src/quota/lease.js';

const R = 1_000;
const budgets = [{ bucket: 'b', ratePerSecond: 1_000 }];
const usage = (
  agent: string,
  perSecond: number,
  extra: Partial<UsageReport> = {},
): UsageReport => ({
  agent,
  bucket: 'b',
  allowed: perSecond,
  denied: 0,
  elapsedMs: R,
  ...extra,
});
let versions: Record<string, number> = {};
const rates = (c: QuotaController, nowMs: number) => {
  const leases = c.round(nowMs).leases;
  versions = Object.fromEntries(leases.map((l) => [l.agent, l.version]));
  return Object.fromEntries(leases.map((l) => [l.agent, Math.round(l.rate)]));
};
/** Acknowledges the lease the last round sent `agent`. */
const held = (agent: string) => ({ heldVersion: versions[agent]! });

/** a and b at 500 each, both asking for all 1,000 (acknowledged), after the round at R. */
function twoAgentsWantingAll(): QuotaController {
  const c = new QuotaController({ budgets, newcomerReserve: 0 }, 1);
  c.report(usage('a', 0), 0);
  c.report(usage('b', 0), 0);
  expect(rates(c, 0)).toEqual({ a: 500, b: 500 });
  c.report(usage('a', 1_000, held('a')), R);
  c.report(usage('b', 1_000, held('b')), R);
  expect(rates(c, R)).toEqual({ a: 500, b: 500 });
  return c;
}

describe('QuotaController', () => {
  it('gives a newcomer a conservative lease at once, from what is unassigned', () => {
    const c = new QuotaController({ budgets }, 1);
    // Alone: half an equal share (newcomerShare 0.5) of 1,000.
    expect(c.report(usage('a', 0), 0)?.rate).toBe(500);
    // Second agent: half of 1,000 / 2 = 250, and 500 is still free.
    expect(c.report(usage('b', 0), 0)?.rate).toBe(250);
    // Already known: no lease until the round.
    expect(c.report(usage('a', 10), 10)).toBeUndefined();
  });

  it('shares by demand, cuts at once and raises only once the cut is acknowledged', () => {
    const c = new QuotaController({ budgets, newcomerReserve: 0 }, 1);
    c.report(usage('a', 0), 0); // 500
    c.report(usage('b', 0), 0); // 250
    // No demand yet: the budget is spread by weight, 500 each.
    expect(rates(c, 0)).toEqual({ a: 500, b: 500 });
    // a wants 900, b wants 100: targets 900 / 100. b is cut to 100 at once, but its 500
    // stays counted until b acknowledges the cut, so a cannot rise yet.
    c.report(usage('a', 900, { ...held('a') }), R);
    c.report(usage('b', 100, { ...held('b') }), R);
    expect(rates(c, R)).toEqual({ a: 500, b: 100 });
    // Both acknowledge version 3: a gets its 900.
    c.report(usage('a', 500, { ...held('a'), denied: 400 }), 2 * R);
    c.report(usage('b', 100, { ...held('b') }), 2 * R);
    expect(rates(c, 2 * R)).toEqual({ a: 900, b: 100 });
  });

  it('an agent that leaves is counted to the end of its window plus the margin, then its share goes to the others', () => {
    // Both want all of it; b leaves at 1.2 s. Its 500 counts until 1.2 + R + δ (0.5 s)
    // = 2.7 s, not until its lease's deadline, 0 + L (3 s) + δ = 3.5 s.
    const c = twoAgentsWantingAll();
    expect(c.leave('b', 'b', 1_200)).toBe(true);
    expect(c.leave('b', 'nobody', 1_200)).toBe(false);
    c.report(usage('a', 1_000, held('a')), 2 * R);
    expect(rates(c, 2 * R)).toEqual({ a: 500 }); // b gets no more leases; its 500 still counts
    expect(Math.round(c.committed('b', 2_699))).toBe(1_000);
    c.report(usage('a', 1_000, held('a')), 2_700);
    expect(rates(c, 2_700)).toEqual({ a: 1_000 });
    // b comes back: a newcomer, from what is free (nothing until a's cut is acknowledged).
    expect(Math.round(c.report(usage('b', 0), 2_800)!.rate)).toBe(0);
  });

  it('an agent back while a lease it left still counts gets that rate again, and the ledger does not grow', () => {
    const c = twoAgentsWantingAll();
    // b's stream ends at 1.2 s and it reports on a new one at 1.5 s, while its 500 still
    // counts (to 2.7 s): nothing is free, and a newcomer's share would be 0 (DENY_ALL for a
    // round, as a 1,000-agent fleet showed), but b gets its 500 back.
    c.leave('b', 'b', 1_200);
    expect(Math.round(c.report(usage('b', 1_000), 1_500)!.rate)).toBe(500);
    expect(Math.round(c.committed('b', 1_500))).toBe(1_000);
    expect(Math.round(c.committed('b', 2_800))).toBe(1_000);
  });

  it('serves a higher priority first', () => {
    const c = new QuotaController({ budgets, newcomerReserve: 0, newcomerShare: 1e-9 }, 1);
    c.report(usage('lo', 0), 0);
    c.report(usage('hi', 0), 0);
    rates(c, 0);
    c.report(usage('lo', 800, { ...held('lo') }), R);
    c.report(usage('hi', 700, { ...held('hi'), priority: 1 }), R);
    // lo is cut from 500 to 300 at once; hi rises once lo has acknowledged.
    expect(rates(c, R)).toEqual({ hi: 500, lo: 300 });
    c.report(usage('lo', 300, { ...held('lo'), denied: 500 }), 2 * R);
    c.report(usage('hi', 500, { ...held('hi'), denied: 200, priority: 1 }), 2 * R);
    expect(rates(c, 2 * R)).toEqual({ hi: 700, lo: 300 });
  });

  it('takes back an idle agent’s share once its lease has run out (TTL + margin)', () => {
    const c = new QuotaController({ budgets, newcomerReserve: 0 }, 1);
    c.report(usage('a', 0), 0);
    c.report(usage('b', 0), 0);
    rates(c, 0);
    c.report(usage('a', 1_000, { ...held('a') }), R);
    c.report(usage('b', 1_000, { ...held('b') }), R);
    expect(rates(c, R)).toEqual({ a: 500, b: 500 });
    // b goes silent after its report at R. It is sent one more lease at 2R (idle after
    // 2R without a report), which counts until 2R + 3R + R/2 = 5.5R.
    for (let t = 2; t <= 5; t++) {
      c.report(usage('a', 1_000, { ...held('a') }), t * R);
      expect(rates(c, t * R).a).toBe(500);
    }
    c.report(usage('a', 1_000, { ...held('a') }), 6 * R);
    expect(rates(c, 6 * R)).toEqual({ a: 1_000 });
    expect(c.record('b', 'b')).toBeUndefined();
  });

  it('abandons an agent that reports no usage for abandonAfterMs', () => {
    const c = new QuotaController({ budgets, abandonAfterMs: 2 * R }, 1);
    c.report(usage('a', 0), 0);
    c.report(usage('a', 0), R);
    expect(c.round(R).abandoned).toEqual([]);
    c.report(usage('a', 0), 2 * R);
    const r = c.round(2 * R);
    expect(r.abandoned).toEqual([{ agent: 'a', bucket: 'b' }]);
    expect(r.leases).toEqual([]);
    // Reporting again starts over as a newcomer, with a lease at once.
    expect(c.report(usage('a', 5), 3 * R)?.rate).toBeGreaterThan(0);
  });

  it('carries its state to a successor, which keeps every commitment', () => {
    const a = new QuotaController({ budgets, newcomerReserve: 0 }, 1);
    a.report(usage('x', 0), 0);
    a.round(0);
    const b = new QuotaController({ budgets, newcomerReserve: 0 }, 2, a.state());
    expect(b.committed('b', R)).toBe(a.committed('b', R));
    const lease = b.round(R).leases[0]!;
    expect(lease.fencingToken).toBe(2);
    expect(lease.version).toBe(3);
  });

  it('an agent forgotten and met again accepts its new leases (versions never repeat)', () => {
    const c = new QuotaController({ budgets }, 1);
    const agent = new QuotaAgent({ agent: 'a', bucket: 'b', fallback: { kind: 'deny' } }, 0);
    const send = (nowMs: number) => {
      const first = c.report(agent.report(nowMs), nowMs);
      if (first !== undefined) expect(agent.apply(first, nowMs)).toBe('applied');
      for (const l of c.round(nowMs).leases) expect(agent.apply(l, nowMs)).toBe('applied');
    };
    for (let t = 0; t < 5; t++) send(t * R);
    // Silent long enough for the record to go (idle, then its last lease runs out).
    for (let t = 5; t < 12; t++) c.round(t * R);
    expect(c.record('b', 'a')).toBeUndefined();
    send(12 * R);
    expect(agent.lease(12 * R)).toBeDefined();
  });

  it('names every invalid option at once', () => {
    expect(
      () =>
        new QuotaController(
          { budgets: [{ bucket: '', ratePerSecond: -1 }], refreshMs: 1_000, leaseTtlMs: 500 },
          1,
        ),
    ).toThrow(
      'invalid quota controller options: budgets[0].bucket: must be a non-empty string; budgets[0].ratePerSecond: must be a number > 0, got -1; leaseTtlMs: must be ≥ refreshMs (1000), got 500',
    );
  });
});

describe('partition bound', () => {
  it('counts only the fallback, for P + R − L', () => {
    // C = 1,000,000/s, 100 agents on 100/s each, R = 1 s, L = 3 s, P = 5 s: 3 s of
    // fallback at 10,000/s → 30,000 units, and at most 101% in any window of R.
    const input = {
      budgetPerSecond: 1_000_000,
      refreshMs: 1_000,
      leaseTtlMs: 3_000,
      partitionMs: 5_000,
      fallbackRatePerSecond: 10_000,
    };
    expect(partitionBound(input)).toEqual({
      fallbackMs: 3_000,
      extraUnits: 30_000,
      peakRatio: 1.01,
    });
    // A partition shorter than L − R never reaches the fallback.
    expect(partitionBound({ ...input, partitionMs: 2_000 })).toEqual({
      fallbackMs: 0,
      extraUnits: 0,
      peakRatio: 1,
    });
    expect(partitionBoundSection(input).lines.map((l) => `${l.label}: ${l.value}`)).toEqual([
      'stale lease: 0',
      'fallback runs, at most: 3s',
      'units over the budget, at most: 30,000',
      'any window of R, at most: 101% of the budget',
    ]);
  });

  it('bounds what whole units add to paced shares in a window of R: ⌈C·R⌉ + n − 1', () => {
    // 2/s over 3 agents, R = 1 s: each may be paced at 1 per R, 3 in all; skewed shares
    // (2 tiny, 1 near 2/s, paced at 2) reach 2 + 1 + 1 = 4.
    expect(pacedSharesBound({ budgetPerSecond: 2, refreshMs: 1_000, agents: 3 })).toBe(4);
    // C·R = 1.5 (0.5/s over R = 3 s): one agent at 0.5/s is paced at ⌈1.5⌉ = 2.
    expect(pacedSharesBound({ budgetPerSecond: 0.5, refreshMs: 3_000, agents: 1 })).toBe(2);
    // 1/3 × 3 counts as 1, not 2 (the tolerance the agent's ⌈rate × R⌉ uses).
    expect(pacedSharesBound({ budgetPerSecond: 1 / 3, refreshMs: 3_000, agents: 1 })).toBe(1);
    const section = partitionBoundSection({
      budgetPerSecond: 100,
      refreshMs: 1_000,
      leaseTtlMs: 3_000,
      partitionMs: 5_000,
      fallbackRatePerSecond: 0,
      agents: 100,
    });
    expect(section.lines.at(-1)).toMatchObject({
      label: 'paced shares',
      value: '199 units in a window of R, at most',
    });
  });
});
