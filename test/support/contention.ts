/**
 * Races of many limiters (one per connection) at one bucket, shared by the Redis and the
 * Redis Cluster contention tests.
 */
import { expect } from 'vitest';
import type { Limiter } from '../../src/limiter/limiter.js';
import { decidedByStore } from './check-results.js';
import { randomInt } from './random.js';

/** Fires `attempts` calls per limiter at once; results in (limiter, attempt) order. */
export function race<T>(
  ls: readonly Limiter[],
  attempts: number,
  perConnection: (l: Limiter, i: number, j: number) => Promise<T>,
): Promise<T[]> {
  return Promise.all(
    ls.flatMap((l, i) => Array.from({ length: attempts }, (_, j) => perConnection(l, i, j))),
  );
}

/**
 * One round of the all-or-nothing race: `ls` hold a `tenant` policy (burst 50) and a
 * `route` policy (burst 20, per tenant and route), both refilling 1 unit per hour. Every
 * connection fires `attempts` checks of random routes A, B, C (60 route units > 50 tenant
 * units) and costs 1..3 for `tenant`. Asserts that every admitted unit, and nothing else,
 * left the tenant bucket and each route bucket, within their bursts. Returns
 * `tenant=A+B+C` of the admitted units.
 */
export async function tenantRouteRound(
  ls: readonly Limiter[],
  attempts: number,
  random: () => number,
  tenant: string,
): Promise<string> {
  const routes = ['A', 'B', 'C'];
  const reqs = Array.from({ length: ls.length * attempts }, () => ({
    route: routes[randomInt(random, 0, 2)]!,
    cost: randomInt(random, 1, 3),
  }));
  const results = await race(ls, attempts, (l, i, j) => {
    const q = reqs[i * attempts + j]!;
    return l.check({ tenant, route: q.route }, { cost: q.cost });
  });
  expect(results.every(decidedByStore)).toBe(true);
  const admittedByRoute = new Map(routes.map((r) => [r, 0]));
  let admittedTotal = 0;
  results.forEach((r, k) => {
    expect(r.decisions.map((d) => d.policy)).toEqual(['tenant', 'route']);
    if (!r.allowed) return;
    const q = reqs[k]!;
    admittedByRoute.set(q.route, admittedByRoute.get(q.route)! + q.cost);
    admittedTotal += q.cost;
  });
  const peek = (route: string) =>
    ls[0]!.check({ tenant, route }, { cost: 0 }).then((r) => r.decisions);
  const tenantUsed = 50 - (await peek('A'))[0]!.remaining;
  // Every admitted unit, and nothing else, left the tenant bucket (±1/h refill).
  expect(tenantUsed).toBeGreaterThan(admittedTotal - 0.01);
  expect(tenantUsed).toBeLessThanOrEqual(admittedTotal);
  expect(admittedTotal).toBeLessThanOrEqual(50);
  for (const route of routes) {
    const routeUsed = 20 - (await peek(route))[1]!.remaining;
    const admitted = admittedByRoute.get(route)!;
    expect(admitted).toBeLessThanOrEqual(20);
    expect(routeUsed).toBeGreaterThan(admitted - 0.01);
    expect(routeUsed).toBeLessThanOrEqual(admitted);
  }
  return `${admittedTotal}=${routes.map((r) => admittedByRoute.get(r)).join('+')}`;
}
