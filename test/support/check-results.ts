/** Predicates on a limiter's `CheckResult` shared by the store and limiter tests. */
import type { CheckResult } from '../../src/limiter/check-result.js';

/**
 * True when the store itself decided every policy of the check (no fail-open or
 * fail-closed path): a store error must never be counted as an admission or a denial.
 */
export function decidedByStore(r: CheckResult): boolean {
  return r.decisions.length > 0 && r.decisions.every((d) => d.path === 'store');
}
