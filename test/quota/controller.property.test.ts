import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QuotaAgent } from '../../src/quota/agent.js';
import { QuotaController } from '../../src/quota/controller.js';

// A random fleet on a manual clock: agents join, leave (quietly, or saying so), change
// demand, reconnect, and lose leases and reports at random. At every step, the leases the
// agents enforce add up to no more than the budget: the ledger's invariant, seen from the
// agents' side.
const BUDGET = 1_000;
const R = 1_000;

const stepArb = fc.record({
  demands: fc.array(fc.double({ min: 0, max: 600, noNaN: true }), { minLength: 8, maxLength: 8 }),
  present: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  reportLost: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  leaseLost: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  failover: fc.boolean(),
  /** An agent that reconnects and is re-sent its newest lease at once. */
  reconnect: fc.option(fc.integer({ min: 0, max: 7 })),
  /** An agent that leaves (stops, then says so) and comes back as a new process. */
  leaves: fc.option(fc.integer({ min: 0, max: 7 })),
});

describe('QuotaController ledger', () => {
  it('the leases in force never sum above the budget, whatever is lost or delayed', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 40 }), (steps) => {
        let token = 1;
        let controller = new QuotaController(
          { budgets: [{ bucket: 'b', ratePerSecond: BUDGET }] },
          token,
        );
        const agents = Array.from(
          { length: 8 },
          (_, i) => new QuotaAgent({ agent: `a${i}`, bucket: 'b', fallback: { kind: 'deny' } }, 0),
        );
        let nowMs = 0;
        for (const s of steps) {
          nowMs += R;
          if (s.failover) {
            const budgets = [{ bucket: 'b', ratePerSecond: BUDGET }];
            controller = new QuotaController({ budgets }, ++token, controller.state());
          }
          if (s.leaves !== null) {
            const name = `a${s.leaves}`;
            controller.leave('b', name, nowMs);
            agents[s.leaves] = new QuotaAgent(
              { agent: name, bucket: 'b', fallback: { kind: 'deny' } },
              nowMs,
            );
          }
          agents.forEach((a, i) => {
            if (!s.present[i]) return;
            a.admit(nowMs, (s.demands[i]! * R) / 1000);
            const report = a.report(nowMs);
            if (s.reportLost[i]) return;
            const first = controller.report(report, nowMs);
            if (first !== undefined && !s.leaseLost[i]) a.apply(first, nowMs);
          });
          if (s.reconnect !== null) {
            const again = controller.renew('b', `a${s.reconnect}`, nowMs);
            if (again !== undefined) agents[s.reconnect]!.apply(again, nowMs);
          }
          for (const lease of controller.round(nowMs).leases) {
            const i = Number(lease.agent.slice(1));
            if (!s.leaseLost[(i + 3) % 8]) agents[i]!.apply(lease, nowMs);
          }
          const inForce = agents.reduce((sum, a) => sum + (a.lease(nowMs)?.rate ?? 0), 0);
          expect(inForce).toBeLessThanOrEqual(BUDGET);
          expect(controller.committed('b', nowMs)).toBeLessThanOrEqual(BUDGET);
        }
      }),
      { numRuns: 1_000 },
    );
  });
});
