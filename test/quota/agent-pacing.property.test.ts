import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QuotaAgent } from '../../src/quota/agent.js';
import type { Lease, LeaseFallback } from '../../src/quota/lease.js';
import { propertySeed } from '../support/property-seed.js';

// The pacing bound of a QuotaAgent (docs/quota-leases.md, "Paced shares"), on the agent
// alone with injected time. Random leases, as the controllers send them (window R, or a
// whole-unit fill longer than R, of a length that is or is not a multiple of R) and
// others, replaced mid-window by leases of other windows, with the fallback between
// them when a lease runs out; random request times and costs, whole (take) and fluid
// (admit). Every admission is recorded with the rule it was admitted under, and:
//
// (a) at each admission, the units of its window of R so far (under any rule) are at
//     most the per-R cap of the rule it is admitted under: ⌈rate × R⌉ for a lease over
//     a fill longer than R, the allowance for a rule over R (a lease's burst, the static
//     fallback's rate × R). So a window of R holds at most the cap of the last rule that
//     admitted in it, across any change of lease;
// (b) at each admission under a lease, the units of that lease's fill window so far
//     (under any rule) are at most its burst;
// (c) while one lease holds, any span of T ms admits at most rate × T + 2 × burst, and at
//     most ⌈rate × R⌉ × (⌊T / R⌋ + 2) when it is paced: (b) gives one burst per fill
//     window, and a span meets at most ⌊T / W⌋ + 2 of them (burst ≤ rate × W).
const EPS = 1e-6;

interface Admission {
  readonly t: number;
  readonly units: number;
  /** The lease in force, or undefined on the fallback. */
  readonly lease: Lease | undefined;
}

const leaseArb = (R: number) =>
  fc.oneof(
    // A whole-unit fill (RLQS token_bucket): tokens per fillMs, enforced over max(R, fill).
    fc
      .record({ tokens: fc.integer({ min: 1, max: 12 }), fillMs: fc.integer({ min: 1, max: 30 }) })
      .map(({ tokens, fillMs }) => {
        const rate = (tokens * 1000) / (fillMs * 1000);
        const windowMs = Math.max(R, fillMs * 1000);
        return { rate, windowMs, burst: Math.min(tokens, (rate * windowMs) / 1000) };
      }),
    // A fluid share over R (the in-process controller).
    fc.double({ min: 0, max: 40, noNaN: true }).map((rate) => ({
      rate,
      windowMs: R,
      burst: (rate * R) / 1000,
    })),
    // Any window at least R, of any length in ms, its burst the rate's or less.
    fc
      .record({
        rate: fc.double({ min: 0, max: 10, noNaN: true }),
        windowMs: fc.integer({ min: R, max: 20 * R }),
        floor: fc.boolean(),
      })
      .map(({ rate, windowMs, floor }) => {
        const burst = (rate * windowMs) / 1000;
        return { rate, windowMs, burst: floor ? Math.floor(burst) : burst };
      }),
  );

const eventArb = (R: number) =>
  fc.record({
    // Steps of R (steady demand) reach a fill's last windows of R and the next one's first.
    dtMs: fc.oneof(
      fc.integer({ min: 0, max: 3 * R }),
      fc.constant(0),
      fc.integer({ min: 0, max: 50 }),
      fc.constant(R),
    ),
    // Requests outnumber leases, so that one lease often lasts several fills.
    what: fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constant('take' as const),
          cost: fc.integer({ min: 1, max: 4 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('admit' as const),
          units: fc.double({ min: 0, max: 8, noNaN: true }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('apply' as const),
          lease: leaseArb(R),
          ttlMs: fc.integer({ min: R / 2, max: 40 * R }),
        }),
      },
    ),
  });

const caseArb = fc
  .record({
    R: fc.constantFrom(1_000, 1_500, 2_000, 3_000),
    fallback: fc.oneof(
      fc.constant<LeaseFallback>({ kind: 'deny' }),
      fc
        .double({ min: 0, max: 20, noNaN: true })
        .map((rate): LeaseFallback => ({ kind: 'static', rate })),
    ),
    startMs: fc.integer({ min: 0, max: 100_000 }),
  })
  .chain((c) =>
    fc.record({
      R: fc.constant(c.R),
      fallback: fc.constant(c.fallback),
      startMs: fc.constant(c.startMs),
      events: fc.array(eventArb(c.R), { minLength: 1, maxLength: 120 }),
    }),
  );

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

/** Runs a case on a fresh agent and returns every admission, in time order. */
function run(c: Case): Admission[] {
  const agent = new QuotaAgent(
    { agent: 'a', bucket: 'b', fallback: c.fallback, windowMs: c.R },
    c.startMs,
  );
  const admissions: Admission[] = [];
  let nowMs = c.startMs;
  let version = 0;
  for (const e of c.events) {
    nowMs += e.dtMs;
    const w = e.what;
    if (w.kind === 'apply') {
      const lease: Lease = {
        agent: 'a',
        bucket: 'b',
        ...w.lease,
        ttlMs: w.ttlMs,
        version: ++version,
        fencingToken: 1,
        issuedAtMs: nowMs,
      };
      expect(agent.apply(lease, nowMs)).toBe('applied');
      continue;
    }
    const lease = agent.lease(nowMs);
    const units =
      w.kind === 'take'
        ? agent.take(nowMs, w.cost) === 'allowed'
          ? w.cost
          : 0
        : (agent.admit(nowMs, w.units) ?? 0);
    if (units > 0) admissions.push({ t: nowMs, units, lease });
  }
  return admissions;
}

/** The most a window of R holds when the rule admitting is `lease` (or the fallback). */
function perRCap(lease: Lease | undefined, c: Case): number {
  if (lease === undefined) return c.fallback.kind === 'static' ? (c.fallback.rate * c.R) / 1000 : 0;
  return lease.windowMs > c.R ? Math.ceil((lease.rate * c.R) / 1000 - 1e-9) : lease.burst;
}

function sumIn(admissions: readonly Admission[], fromMs: number, upto: number): number {
  let s = 0;
  for (let i = 0; i <= upto; i++) {
    const a = admissions[i]!;
    if (a.t >= fromMs) s += a.units;
  }
  return s;
}

const settings = { numRuns: 2_000, seed: propertySeed() };

describe('QuotaAgent pacing', () => {
  it('(a) a window of R holds at most the per-R cap of each rule admitting in it', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const admissions = run(c);
        admissions.forEach((a, i) => {
          const start = Math.floor(a.t / c.R) * c.R;
          const cap = perRCap(a.lease, c);
          expect(sumIn(admissions, start, i)).toBeLessThanOrEqual(cap + EPS);
        });
      }),
      settings,
    );
  });

  it('(b) a fill window holds at most the burst of each lease admitting in it', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const admissions = run(c);
        admissions.forEach((a, i) => {
          if (a.lease === undefined) return;
          const start = Math.floor(a.t / a.lease.windowMs) * a.lease.windowMs;
          expect(sumIn(admissions, start, i)).toBeLessThanOrEqual(a.lease.burst + EPS);
        });
      }),
      settings,
    );
  });

  it('(c) while one lease holds, a span of T admits at most rate × T + 2 × burst', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const admissions = run(c);
        for (let i = 0; i < admissions.length; i++) {
          const l = admissions[i]!.lease;
          if (l === undefined) continue;
          let s = 0;
          for (let j = i; j < admissions.length && admissions[j]!.lease === l; j++) {
            s += admissions[j]!.units;
            const T = admissions[j]!.t - admissions[i]!.t;
            expect(s).toBeLessThanOrEqual((l.rate * T) / 1000 + 2 * l.burst + EPS);
            if (l.windowMs > c.R) {
              const cap = Math.ceil((l.rate * c.R) / 1000 - 1e-9);
              expect(s).toBeLessThanOrEqual(cap * (Math.floor(T / c.R) + 2) + EPS);
            }
          }
        }
      }),
      settings,
    );
  });
});
