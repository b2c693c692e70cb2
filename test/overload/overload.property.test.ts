/**
 * Invariants of the concurrency limiter and the circuit breaker over random operation
 * sequences (fast-check, 1,000 runs each), on a manual clock.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  AimdLimit,
  CRITICALITIES,
  CircuitBreaker,
  ConcurrencyLimiter,
  FixedLimit,
  GradientLimit,
  LoadShedder,
  type BreakerPermit,
  type ConcurrencyPermit,
  type Criticality,
  type LimitAlgorithm,
  type PermitOutcome,
} from '../../src/overload.js';
import { propertySeed } from '../support/property-seed.js';

const NUM_RUNS = 1_000;

const criticality = fc.constantFrom(...CRITICALITIES);
const outcome = fc.constantFrom<PermitOutcome>('success', 'failure', 'dropped', 'ignore');

const limiterOp = fc.oneof(
  fc.record({ op: fc.constant('acquire' as const), c: criticality }),
  fc.record({ op: fc.constant('release' as const), i: fc.nat(), outcome, twice: fc.boolean() }),
  fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 200 }) }),
);

const algorithm = fc.oneof(
  fc.integer({ min: 1, max: 20 }).map((n) => (): LimitAlgorithm => new FixedLimit(n)),
  fc
    .record({
      initial: fc.integer({ min: 1, max: 20 }),
      timeoutMs: fc.integer({ min: 1, max: 100 }),
    })
    .map((o) => (): LimitAlgorithm => new AimdLimit({ ...o, min: 1, max: 40 })),
  fc
    .record({
      initial: fc.integer({ min: 2, max: 20 }),
      tolerance: fc.double({ min: 1, max: 3, noNaN: true }),
    })
    .map((o) => (): LimitAlgorithm => new GradientLimit({ ...o, min: 2, max: 40 })),
);

const shares = fc
  .array(fc.double({ min: 0.05, max: 1, noNaN: true }), { minLength: 4, maxLength: 4 })
  .map((xs) => {
    const sorted = [...xs].sort((a, b) => b - a);
    return Object.fromEntries(CRITICALITIES.map((c, i) => [c, sorted[i] as number])) as Record<
      Criticality,
      number
    >;
  });

describe('ConcurrencyLimiter invariants', () => {
  it('a slot is taken only below its criticality ceiling; in flight = permits held; release is idempotent; ceilings never rise as criticality falls', () => {
    fc.assert(
      fc.property(algorithm, shares, fc.array(limiterOp, { maxLength: 200 }), (make, s, ops) => {
        const clock = new ManualClock(0);
        const limiter = new ConcurrencyLimiter({
          algorithm: make(),
          shedder: new LoadShedder(s),
          clock,
        });
        const held: ConcurrencyPermit[] = [];
        for (const o of ops) {
          if (o.op === 'acquire') {
            const before = limiter.inflight;
            const ceiling = limiter.ceiling(o.c);
            const p = limiter.tryAcquire(o.c);
            // Admitted exactly when below the ceiling of that instant.
            expect(p !== undefined).toBe(before < ceiling);
            if (p !== undefined) {
              held.push(p);
              expect(limiter.inflight).toBeLessThanOrEqual(ceiling);
              expect(ceiling).toBeLessThanOrEqual(Math.max(1, limiter.limit));
            }
          } else if (o.op === 'release' && held.length > 0) {
            const [p] = held.splice(o.i % held.length, 1);
            p?.release(o.outcome);
            if (o.twice) p?.release(o.outcome);
          } else if (o.op === 'advance') {
            clock.advance(o.ms);
          }
          expect(limiter.inflight).toBe(held.length);
          expect(limiter.limit).toBeGreaterThanOrEqual(1);
          const ceilings = CRITICALITIES.map((c) => limiter.ceiling(c));
          for (let i = 1; i < ceilings.length; i++) {
            expect(ceilings[i]).toBeLessThanOrEqual(ceilings[i - 1] as number);
          }
        }
      }),
      { numRuns: NUM_RUNS, seed: propertySeed() },
    );
  });
});

const breakerOptions = fc.record({
  minimumCalls: fc.integer({ min: 1, max: 30 }),
  errorRatio: fc.double({ min: 0.01, max: 1, noNaN: true }),
  openMs: fc.integer({ min: 1, max: 5_000 }),
  probes: fc.integer({ min: 1, max: 5 }),
  probeLeaseMs: fc.integer({ min: 1, max: 5_000 }),
});

const breakerOp = fc.oneof(
  fc.constant({ op: 'acquire' as const }),
  fc.record({
    op: fc.constant('record' as const),
    i: fc.nat(),
    outcome: fc.constantFrom('success' as const, 'failure' as const, 'ignore' as const),
  }),
  fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
);

describe('CircuitBreaker invariants', () => {
  it('from a fresh window, consecutive failures open it exactly at minimumCalls', () => {
    fc.assert(
      fc.property(breakerOptions, (o) => {
        const breaker = new CircuitBreaker({ ...o, clock: new ManualClock(0) });
        for (let call = 1; call <= o.minimumCalls; call++) {
          expect(breaker.state).toBe('closed');
          breaker.tryAcquire()?.record('failure');
        }
        expect(breaker.state).toBe('open');
      }),
      { numRuns: NUM_RUNS, seed: propertySeed() },
    );
  });

  it('never wedged: whatever happened, with every held call abandoned, waiting openMs + probeLeaseMs lets `probes` successful probes close it; probe leases never exceed probes', () => {
    fc.assert(
      fc.property(breakerOptions, fc.array(breakerOp, { maxLength: 150 }), (o, ops) => {
        const clock = new ManualClock(0);
        const breaker = new CircuitBreaker({ ...o, clock });
        const held: BreakerPermit[] = [];
        for (const op of ops) {
          if (op.op === 'acquire') {
            const p = breaker.tryAcquire();
            if (p !== undefined) held.push(p);
          } else if (op.op === 'record' && held.length > 0) {
            held.splice(op.i % held.length, 1)[0]?.record(op.outcome);
          } else if (op.op === 'advance') {
            clock.advance(op.ms);
          }
          expect(breaker.probesInFlight).toBeLessThanOrEqual(o.probes);
          if (breaker.state === 'open')
            expect(breaker.retryAfterMs()).toBeLessThanOrEqual(o.openMs);
        }
        // Abandon everything still held, then recover.
        clock.advance(o.openMs + o.probeLeaseMs);
        const recovered = breaker.state !== 'closed';
        for (let i = 0; i < o.probes && breaker.state !== 'closed'; i++) {
          const p = breaker.tryAcquire();
          expect(p).toBeDefined();
          p?.record('success');
        }
        expect(breaker.state).toBe('closed');
        // Once it has changed state, late reports of calls admitted before cannot reopen it.
        if (recovered) {
          for (const p of held) p.record('failure');
          expect(breaker.state).toBe('closed');
        }
      }),
      { numRuns: NUM_RUNS, seed: propertySeed() },
    );
  });
});
