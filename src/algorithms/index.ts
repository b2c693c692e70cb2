import type { Algorithm } from './algorithm.js';
import { fixedWindow } from './fixed-window.js';
import { gcra } from './gcra.js';
import { leakyBucket } from './leaky-bucket.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindowCounter } from './sliding-window-counter.js';
import { tokenBucket } from './token-bucket.js';

/**
 * The registry: every algorithm by its name in policy files. A new algorithm is its file
 * here, its Lua file under src/stores/redis/lua/algorithms/ and one line below; the kinds,
 * the Lua codes, the Envoy extension and the capacity plan all follow from this table
 * (docs/algorithms.md, "Adding an algorithm").
 *
 * Typed loosely on purpose: a policy's params were produced by the same algorithm's
 * `paramsSchema`, which is what makes the pairing safe.
 */
const REGISTRY = {
  'token-bucket': tokenBucket,
  gcra: gcra,
  'fixed-window': fixedWindow,
  'sliding-log': slidingLog,
  'sliding-window-counter': slidingWindowCounter,
  'leaky-bucket': leakyBucket,
} as const;

/** The name of an algorithm in policy files. */
export type AlgorithmKind = keyof typeof REGISTRY;

/** Every algorithm Sluice implements, by name. */
export const ALGORITHMS: Readonly<Record<AlgorithmKind, Algorithm<unknown, unknown>>> =
  Object.freeze(REGISTRY as unknown as Record<AlgorithmKind, Algorithm<unknown, unknown>>);

/** Every algorithm's name, in registry order. */
export const ALGORITHM_KINDS: readonly AlgorithmKind[] = Object.freeze(
  Object.keys(REGISTRY) as AlgorithmKind[],
);

/** Whether `kind` names a registered algorithm. */
export function isAlgorithmKind(kind: string): kind is AlgorithmKind {
  return Object.hasOwn(REGISTRY, kind);
}

/** The algorithm of a policy's `algorithm`. Throws a RangeError naming the known ones. */
export function algorithmOf(kind: string): Algorithm<unknown, unknown> {
  if (!isAlgorithmKind(kind)) {
    throw new RangeError(
      `unknown algorithm ${JSON.stringify(kind)}; expected one of ${ALGORITHM_KINDS.join(', ')}`,
    );
  }
  return ALGORITHMS[kind];
}
