/**
 * The concurrency limit under contention: 64 acquirers hammer one boundary (queue on,
 * random holds over real event-loop turns), 20 times; no admission ever finds more in
 * flight than the limit allows (Netflix #234's check-then-act race).
 */
import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import {
  AimdLimit,
  CRITICALITIES,
  ConcurrencyLimiter,
  FixedLimit,
  LoadShedder,
  createAdmissionBoundary,
  type Criticality,
} from '../../src/overload.js';
import { mulberry32 } from '../support/random.js';

const ACQUIRERS = 64;
const REPETITIONS = 20;

describe('ConcurrencyLimiter', () => {
  it('tryAcquire takes the slot in the same step as the check; release is idempotent', () => {
    const limiter = new ConcurrencyLimiter({ algorithm: new FixedLimit(2) });
    const a = limiter.tryAcquire();
    const b = limiter.tryAcquire();
    expect([a !== undefined, b !== undefined, limiter.tryAcquire()]).toEqual([
      true,
      true,
      undefined,
    ]);
    a?.release('success');
    a?.release('success'); // the second release must not free a second slot
    expect(limiter.inflight).toBe(1);
    expect(limiter.tryAcquire()).toBeDefined();
    expect(limiter.tryAcquire()).toBeUndefined();
  });

  it('ceilings: with limit 10, SHEDDABLE stops at 5, SHEDDABLE_PLUS at 8, CRITICAL at 9, CRITICAL_PLUS at 10', () => {
    // ceil(10 × share): 0.5 → 5, 0.75 → 8 (7.5 rounded up), 0.9 → 9, 1 → 10.
    const limiter = new ConcurrencyLimiter({
      algorithm: new FixedLimit(10),
      shedder: new LoadShedder(),
    });
    const admittedUpTo = (c: Criticality): number => {
      while (limiter.tryAcquire(c) !== undefined);
      return limiter.inflight;
    };
    expect(CRITICALITIES.slice().reverse().map(admittedUpTo)).toEqual([5, 8, 9, 10]);
  });

  it(`${ACQUIRERS} concurrent acquirers, ${REPETITIONS} repetitions: 0 overshoot`, async () => {
    const random = mulberry32(234);
    let admissions = 0;
    for (let rep = 0; rep < REPETITIONS; rep++) {
      const limit = 1 + (rep % 10);
      let inflight = 0;
      let maxSeen = 0;
      let overshoot = 0;
      const boundary = createAdmissionBoundary({
        limit: { algorithm: 'fixed', limit },
        shares: { CRITICAL: 1, SHEDDABLE_PLUS: 1, SHEDDABLE: 1 },
        queue: { size: ACQUIRERS, maxWait: 60_000 },
      });
      const worker = async (): Promise<void> => {
        for (let i = 0; i < 5; i++) {
          const a = await boundary.admit();
          if (!a.admitted) throw new Error(`refused: ${a.reason}`);
          inflight++;
          admissions++;
          maxSeen = Math.max(maxSeen, inflight);
          if (inflight > limit) overshoot++;
          for (let t = Math.floor(random() * 4); t > 0; t--) await turn();
          inflight--;
          a.permit.release('success');
        }
      };
      await Promise.all(Array.from({ length: ACQUIRERS }, worker));
      expect({ rep, overshoot }).toEqual({ rep, overshoot: 0 });
      // The contention was real: the limit was reached.
      expect(maxSeen).toBe(limit);
    }
    expect(admissions).toBe(ACQUIRERS * 5 * REPETITIONS);
  });

  it('an adaptive limit that moves under the acquirers is never exceeded when a slot is taken, per criticality', async () => {
    const random = mulberry32(7);
    const clock = new ManualClock(0);
    for (let rep = 0; rep < REPETITIONS; rep++) {
      const violations: string[] = [];
      let taken = 0;
      const boundary = createAdmissionBoundary({
        clock,
        algorithm: new AimdLimit({ initial: 10, min: 2, max: 30, timeoutMs: 5 }),
        queue: { size: ACQUIRERS, maxWait: 60_000 },
      });
      // Every slot is taken through tryAcquire (directly or when the queue is served):
      // check the count against the limit of that instant. A queued request's admission
      // resolves later, when the limit may have fallen since: that is not an overshoot.
      const l = boundary.limiter;
      const tryAcquire = l.tryAcquire.bind(l);
      l.tryAcquire = (c) => {
        const p = tryAcquire(c);
        if (p !== undefined) {
          taken++;
          if (l.inflight > l.ceiling(p.criticality)) {
            violations.push(`${p.criticality}: ${l.inflight} > ${l.ceiling(p.criticality)}`);
          }
        }
        return p;
      };
      await Promise.all(
        Array.from({ length: ACQUIRERS }, async (_, w) => {
          const c = CRITICALITIES[w % 4] as Criticality;
          for (let i = 0; i < 5; i++) {
            const a = await boundary.admit({ criticality: c });
            if (!a.admitted) continue;
            const hold = Math.floor(random() * 4);
            for (let t = hold; t > 0; t--) await turn();
            clock.advance(hold * 3); // holds of 9 ms exceed the 5 ms timeout: the limit falls
            a.permit.release(random() < 0.1 ? 'dropped' : 'success');
          }
        }),
      );
      expect(violations).toEqual([]);
      expect(taken).toBeGreaterThan(ACQUIRERS);
    }
  });
});
