/**
 * Helpers shared by the known-answer tests (`<name>.test.ts`): rows of
 * [nowMs, cost, allowed, remaining, retryAfterMs] replayed on one state, the
 * INVALID_POLICY check and the param-rejection table.
 */
import { expect, it } from 'vitest';
import { z } from 'zod';
import type { Algorithm, Transition } from '../../src/algorithms/algorithm.js';
import type { AlgorithmDecision } from '../../src/core/decision.js';

export type Row = [
  nowMs: number,
  cost: number,
  allowed: boolean,
  remaining: number,
  retryAfterMs: number,
];

/** A row that also records the decision's delayMs (the leaky bucket's delay mode). */
export type DelayRow = [...Row, delayMs: number | undefined];

/** An epoch-ms instant, as a store passes it. */
export const t0 = 1_700_000_000_000;
export const hour = 3_600_000;

/** Replays the rows' requests from a fresh state and maps each decision with `toRow`. */
function replayWith<P, S, R>(
  alg: Algorithm<P, S>,
  params: P,
  rows: readonly (readonly [nowMs: number, cost: number, ...unknown[]])[],
  toRow: (nowMs: number, cost: number, d: AlgorithmDecision) => R,
): R[] {
  let state: S | undefined;
  return rows.map(([nowMs, cost]) => {
    const t = alg.transition(state, nowMs, cost, params);
    state = t.state;
    return toRow(nowMs, cost, t.decision);
  });
}

/** Replays the rows' requests from a fresh state and returns what was decided, as rows. */
export function replay<P, S>(alg: Algorithm<P, S>, params: P, rows: readonly Row[]): Row[] {
  return replayWith(alg, params, rows, (nowMs, cost, d): Row => [
    nowMs,
    cost,
    d.allowed,
    d.remaining,
    d.retryAfterMs,
  ]);
}

/** `replay` for rows that also carry delayMs. */
export function replayWithDelay<P, S>(
  alg: Algorithm<P, S>,
  params: P,
  rows: readonly DelayRow[],
): DelayRow[] {
  return replayWith(alg, params, rows, (nowMs, cost, d): DelayRow => [
    nowMs,
    cost,
    d.allowed,
    d.remaining,
    d.retryAfterMs,
    d.delayMs,
  ]);
}

/** The fields a row checks (resetAfterMs has its own test). */
const pick = ({ status, allowed, limit, remaining, retryAfterMs }: AlgorithmDecision) => ({
  status,
  allowed,
  limit,
  remaining,
  retryAfterMs,
});

/** The status a row implies: cost > limit is INVALID_POLICY, else OK iff allowed. */
const rowStatus = (cost: number, allowed: boolean, limit: number) =>
  cost > limit ? 'INVALID_POLICY' : allowed ? 'OK' : 'OVER_LIMIT';

/**
 * Plays rows on one state of a window algorithm (params with a `limit`) and returns the
 * final state. Every field a row names must match exactly, or with `close` to 1e-9 (for
 * weights that are doubles, such as 0.8, which is not exact).
 */
export function play<P extends { readonly limit: number }, S>(
  alg: Algorithm<P, S>,
  params: P,
  rows: readonly Readonly<Row>[],
  { close = false } = {},
): S | undefined {
  let state: S | undefined;
  rows.forEach(([nowMs, cost, allowed, remaining, retryAfterMs], row) => {
    const t = alg.transition(state, nowMs, cost, params);
    const d = t.decision;
    const want = {
      row,
      status: rowStatus(cost, allowed, params.limit),
      allowed,
      limit: params.limit,
    };
    if (close) {
      expect({ row, status: d.status, allowed: d.allowed, limit: d.limit }).toEqual(want);
      expect(d.remaining, `row ${row} remaining`).toBeCloseTo(remaining, 9);
      expect(d.retryAfterMs, `row ${row} retryAfterMs`).toBeCloseTo(retryAfterMs, 9);
    } else {
      expect({ row, ...pick(d) }).toEqual({ ...want, remaining, retryAfterMs });
    }
    state = t.state;
  });
  return state;
}

/**
 * Takes `firstCost` from a fresh state at `nowMs`, then asks for `cost`, which must be
 * INVALID_POLICY with `limit`, `remaining` and `resetAfterMs` (the state's own: no wait
 * makes the cost fit, but the state still refills); returns the state before and the
 * transition.
 */
export function expectInvalidPolicy<P, S>(
  alg: Algorithm<P, S>,
  params: P,
  nowMs: number,
  {
    firstCost,
    cost,
    limit,
    remaining,
    resetAfterMs,
  }: Record<'firstCost' | 'cost' | 'limit' | 'remaining' | 'resetAfterMs', number>,
): { state: S; t: Transition<S> } {
  const { state } = alg.transition(undefined, nowMs, firstCost, params);
  const t = alg.transition(state, nowMs, cost, params);
  expect(t.decision).toEqual({
    status: 'INVALID_POLICY',
    allowed: false,
    limit,
    remaining,
    retryAfterMs: 0,
    resetAfterMs,
  });
  return { state, t };
}

/**
 * Registers `rejects <name>, naming the field` for each case: the params schema refuses
 * the input and its prettified error contains `fragment` (z.prettifyError is how the
 * message reads with its path: "✖ problem\n  → at field").
 */
export function itRejectsParams(
  schema: z.ZodType,
  cases: readonly [name: string, input: unknown, fragment: string][],
): void {
  it.each(cases)('rejects %s, naming the field', (_name, input, fragment) => {
    const r = schema.safeParse(input);
    expect(r.success).toBe(false);
    expect(z.prettifyError(r.error!)).toContain(fragment);
  });
}
