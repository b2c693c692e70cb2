import type { AlgorithmKind } from '../../core/policy.js';

/** Algorithm codes understood by applyBatches.lua and refundBatch.lua (`ALG[code]` in lua/includes/). */
export const LUA_ALGORITHM_CODE: Readonly<Record<AlgorithmKind, number>> = Object.freeze({
  'token-bucket': 1,
  gcra: 2,
  'leaky-bucket': 3,
  'fixed-window': 4,
  'sliding-window-counter': 5,
  'sliding-log': 6,
});

type Params = Readonly<Record<string, unknown>>;
const num = (p: Params, k: string): number => p[k] as number;

/**
 * The four numeric params (p1..p4) each Lua include reads, from the validated params.
 * applyBatches.lua gets them packed as doubles (wire.ts); refundBatch.lua as JavaScript's
 * shortest round-trip decimal, which Lua's tonumber() reads back to the same double.
 */
export function luaParams(kind: AlgorithmKind, p: Params): [number, number, number, number] {
  switch (kind) {
    case 'token-bucket':
    case 'gcra':
      return [num(p, 'rate'), num(p, 'periodMs'), num(p, 'burst'), 0];
    case 'leaky-bucket':
      return [
        num(p, 'rate'),
        num(p, 'periodMs'),
        num(p, 'capacity'),
        p['mode'] === 'delay' ? 1 : 0,
      ];
    case 'fixed-window':
      return [num(p, 'limit'), num(p, 'windowMs'), p['chargeDenied'] === true ? 1 : 0, 0];
    case 'sliding-window-counter':
    case 'sliding-log':
      return [num(p, 'limit'), num(p, 'windowMs'), 0, 0];
  }
}
