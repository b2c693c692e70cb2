import {
  ALGORITHMS,
  ALGORITHM_KINDS,
  algorithmOf,
  type AlgorithmKind,
} from '../../algorithms/index.js';

/**
 * Algorithm codes understood by applyBatches.lua and refundBatch.lua (`ALG[code]` in
 * lua/algorithms/): each algorithm's own `luaCode`.
 */
export const LUA_ALGORITHM_CODE: Readonly<Record<AlgorithmKind, number>> = Object.freeze(
  Object.fromEntries(ALGORITHM_KINDS.map((kind) => [kind, ALGORITHMS[kind].luaCode])) as Record<
    AlgorithmKind,
    number
  >,
);

/**
 * The four numeric params (p1..p4) each Lua include reads, from the validated params: the
 * algorithm's `scriptParams`. applyBatches.lua gets them packed as doubles (wire.ts);
 * refundBatch.lua as JavaScript's shortest round-trip decimal, which Lua's tonumber()
 * reads back to the same double.
 */
export function luaParams(kind: string, params: unknown): [number, number, number, number] {
  const [p1, p2, p3, p4] = algorithmOf(kind).scriptParams(params);
  return [p1, p2, p3, p4];
}
