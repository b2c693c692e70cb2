/**
 * The must-show "exact accounting" run of issue 29 (docs/costs.md), for any store: many
 * concurrent clients over several limiters (each its own connection) reserve random
 * estimates and settle random actuals below and above them, against one token bucket
 * that refills nothing (a frozen ManualClock). The test keeps its own ledger from what
 * the limiter answered, reads the bucket's level from the store while the clients run
 * (never deeper in debt than the cap) and at the end (the ledger's, to the unit).
 *
 * The ledger bounds what is held at every step only where the store applies calls in the
 * order their answers arrive (MemoryStore, in process: `inOrder`). Over a network the two
 * orders differ: a give-back applied in Redis before another client's charge may reach
 * its caller after it, so the ledger can run a few units past the bound for a moment
 * while the store never did. There the store's own level is the instant check.
 */
import { expect } from 'vitest';
import type { PolicyInput } from '../../src/config/policies.js';
import type { Limiter } from '../../src/limiter/limiter.js';
import { mulberry32, randomInt } from './random.js';

/**
 * The bucket: `burst` units, one unit per 2^20 ms (so a one-unit wait says the level
 * exactly: `level = 1 - retryAfterMs / 2^20`), `maxDebt` below empty at most.
 */
export function accountingPolicy(burst: number, maxDebt: number): PolicyInput {
  return {
    name: 'accounted',
    match: ['tenant'],
    rate: 1,
    period: PERIOD_MS,
    burst,
    settle: { maxDebt },
    // A store that fails is a denial, never an admission that charged nothing.
    failureMode: 'closed',
    timeout: '5s',
  };
}

const PERIOD_MS = 2 ** 20;

export interface AccountingRun {
  readonly admitted: number;
  readonly denied: number;
  /** Sum of the actuals of the admitted reservations. */
  readonly actuals: number;
  /** Units the settles reported as not charged (the debt cap). */
  readonly capped: number;
  /** The bucket's level at the end, read from the store (negative: in debt). */
  readonly level: number;
}

/**
 * Runs `clients` concurrent clients of `rounds` reservations each, client `i` on
 * `limiters[i % limiters.length]`, and checks: at every step, what is held (estimates
 * not yet settled plus actuals charged) is at most `burst + maxDebt`; at the end, the
 * level is `burst - (actuals - capped)` to the unit, and never below `-maxDebt`.
 */
export async function runExactAccounting(
  limiters: readonly Limiter[],
  o: {
    clients: number;
    rounds: number;
    burst: number;
    maxDebt: number;
    seed: number;
    /** Actuals are drawn from 0 to this many times the estimate. @default 2 */
    overshoot?: number;
    /** The store applies calls in the order they are answered: check the ledger every step. */
    inOrder?: boolean;
  },
): Promise<AccountingRun> {
  const random = mulberry32(o.seed);
  let outstanding = 0;
  let charged = 0;
  let admitted = 0;
  let denied = 0;
  let actuals = 0;
  let capped = 0;
  const holds = () => {
    if (o.inOrder === true) expect(outstanding + charged).toBeLessThanOrEqual(o.burst + o.maxDebt);
  };
  let probes = 0;
  const client = async (i: number): Promise<void> => {
    const limiter = limiters[i % limiters.length]!;
    for (let round = 0; round < o.rounds; round++) {
      const estimate = randomInt(random, 1, 50);
      const r = await limiter.reserve({ tenant: 'acme' }, { cost: estimate });
      if (!r.allowed) {
        denied += 1;
        continue;
      }
      admitted += 1;
      outstanding += estimate;
      holds();
      // Below and above the estimate.
      const actual = randomInt(random, 0, (o.overshoot ?? 2) * estimate);
      const s = await r.settle(actual);
      expect(s.applied).toBe(true);
      outstanding -= estimate;
      charged += actual - s.cappedUnits;
      actuals += actual;
      capped += s.cappedUnits;
      holds();
      // Every 4th settle, the store's own view: never deeper in debt than the cap.
      if ((i + round) % 4 === 0) {
        probes += 1;
        expect(await levelOf(limiters[i % limiters.length]!, o.burst)).toBeGreaterThanOrEqual(
          -o.maxDebt,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)));
  expect(probes).toBeGreaterThan(0);
  const level = await levelOf(limiters[0]!, o.burst);
  expect(level).toBe(o.burst - (actuals - capped));
  expect(level).toBeGreaterThanOrEqual(-o.maxDebt);
  return { admitted, denied, actuals, capped, level };
}

/**
 * The bucket's level, read without changing it: a reservation of the whole burst, which
 * only a full bucket admits (then it is cancelled at once: the level was the burst), and
 * whose denial's wait says the level exactly (`burst - retryAfterMs / 2^20`).
 */
async function levelOf(limiter: Limiter, burst: number): Promise<number> {
  const probe = await limiter.reserve({ tenant: 'acme' }, { cost: burst });
  if (probe.allowed) {
    await probe.cancel();
    return burst;
  }
  return burst - probe.retryAfterMs / PERIOD_MS;
}
