/**
 * The outcome class of a decision. These are different things and are never folded
 * into one another:
 * - `OK`: the request fits every enforced policy.
 * - `OVER_LIMIT`: a valid decision that the request does not fit now.
 * - `UNAVAILABLE`: no decision could be made (store down, timeout, ambiguous write).
 * - `INVALID_POLICY`: the policy, descriptor or cost is wrong; retrying will not help.
 */
export type Status = 'OK' | 'OVER_LIMIT' | 'UNAVAILABLE' | 'INVALID_POLICY';

/** Every status, in a stable order (useful for metrics label sets and exhaustive tests). */
export const STATUSES: readonly Status[] = Object.freeze([
  'OK',
  'OVER_LIMIT',
  'UNAVAILABLE',
  'INVALID_POLICY',
]);
