import type { CheckRecorder } from '../metrics/check-recorder.js';
import type { StoreResult } from '../stores/store.js';
import type { CheckResult } from './check-result.js';
import type { PreparedItem } from './policy-plan.js';

/** Telling a `CheckRecorder` how checks went: asked buckets, in-process store failures, outcomes. */

/** Tells `m` every bucket a check asks for, before any stage or the store answers it. */
export function askedBuckets(
  m: CheckRecorder,
  items: readonly PreparedItem[],
  nowMs: number,
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    m.bucket(item.plan.name, item.key, item.cost, nowMs);
  }
}

/** An in-process store call is not timed (it is the check); a failure of it is counted. */
export function inProcessCall(m: CheckRecorder, results: readonly StoreResult[]): void {
  for (let i = 0; i < results.length; i++) {
    const r = results[i]!;
    if (!r.ok) {
      m.storeCall(0, r.error);
      return;
    }
  }
}

/** Tells `m` how a check started at `t0` ended (now, or when its promise settles). */
export function recorded(
  m: CheckRecorder,
  result: CheckResult | Promise<CheckResult>,
  t0: number,
): CheckResult | Promise<CheckResult> {
  if (!(result instanceof Promise)) {
    m.decided(result.status, result.decisions, performance.now() - t0);
    return result;
  }
  return result.then(
    (r) => {
      m.decided(r.status, r.decisions, performance.now() - t0);
      return r;
    },
    (error: unknown) => {
      m.refused(error, performance.now() - t0);
      throw error;
    },
  );
}
