import { PolicyError, type PolicyIssue } from '../core/errors.js';
import type { QuotaBudget } from './lease.js';

/** Options of a {@link QuotaController}; times in milliseconds. */
export interface ControllerOptions {
  readonly budgets: readonly QuotaBudget[];
  /** How often agents report and rounds run (R). @default 1000 */
  readonly refreshMs?: number;
  /** How long a lease holds once received (L); ≥ refreshMs. @default 3 × refreshMs */
  readonly leaseTtlMs?: number;
  /**
   * Delivery delay plus clock-rate drift (δ): a lease counts against the budget until
   * issue + L + δ. @default refreshMs / 2
   */
  readonly marginMs?: number;
  /** The window a lease's `burst` applies to. @default refreshMs */
  readonly windowMs?: number;
  /**
   * Share of each budget left unassigned by rounds, so that an agent seen for the first
   * time gets a lease at once. @default 0.005
   */
  readonly newcomerReserve?: number;
  /**
   * A newcomer's first lease, as a fraction of an equal share (budget ÷ agents), taken
   * from what is unassigned. @default 0.5
   */
  readonly newcomerShare?: number;
  /**
   * An agent that has not reported for this long gets no more leases; its last one runs
   * out, and then its share is free. @default 2 × refreshMs
   */
  readonly idleAfterMs?: number;
  /** An agent reporting no usage for this long is abandoned (RLQS `abandon_action`). @default 60000 */
  readonly abandonAfterMs?: number;
}

/** Validated, frozen {@link ControllerOptions}. */
export interface ControllerConfig {
  readonly budgets: ReadonlyMap<string, number>;
  readonly refreshMs: number;
  readonly leaseTtlMs: number;
  readonly marginMs: number;
  readonly windowMs: number;
  readonly newcomerReserve: number;
  readonly newcomerShare: number;
  readonly idleAfterMs: number;
  readonly abandonAfterMs: number;
}

function positive(v: number | undefined, fallback: number, path: string, issues: PolicyIssue[]) {
  const n = v ?? fallback;
  if (!Number.isFinite(n) || n <= 0)
    issues.push({ path, message: `must be a number > 0, got ${String(v)}` });
  return n;
}

function fraction(v: number | undefined, fallback: number, path: string, issues: PolicyIssue[]) {
  const n = v ?? fallback;
  if (!Number.isFinite(n) || n < 0 || n >= 1)
    issues.push({ path, message: `must be a number in [0, 1), got ${String(v)}` });
  return n;
}

/** Validates controller options; throws one `SLUICE_ERR_QUOTA_CONFIG_INVALID` listing every issue. */
export function controllerConfig(o: ControllerOptions): ControllerConfig {
  const issues: PolicyIssue[] = [];
  const budgets = new Map<string, number>();
  o.budgets.forEach((b, i) => {
    if (typeof b.bucket !== 'string' || b.bucket === '')
      issues.push({ path: `budgets[${i}].bucket`, message: 'must be a non-empty string' });
    else if (budgets.has(b.bucket))
      issues.push({ path: `budgets[${i}].bucket`, message: `duplicate bucket "${b.bucket}"` });
    budgets.set(b.bucket, positive(b.ratePerSecond, NaN, `budgets[${i}].ratePerSecond`, issues));
  });
  const refreshMs = positive(o.refreshMs, 1000, 'refreshMs', issues);
  const leaseTtlMs = positive(o.leaseTtlMs, 3 * refreshMs, 'leaseTtlMs', issues);
  if (leaseTtlMs < refreshMs)
    issues.push({
      path: 'leaseTtlMs',
      message: `must be ≥ refreshMs (${refreshMs}), got ${leaseTtlMs}`,
    });
  const marginMs = o.marginMs ?? refreshMs / 2;
  if (!Number.isFinite(marginMs) || marginMs < 0)
    issues.push({ path: 'marginMs', message: `must be a number ≥ 0, got ${String(o.marginMs)}` });
  const config: ControllerConfig = {
    budgets,
    refreshMs,
    leaseTtlMs,
    marginMs,
    windowMs: positive(o.windowMs, refreshMs, 'windowMs', issues),
    newcomerReserve: fraction(o.newcomerReserve, 0.005, 'newcomerReserve', issues),
    newcomerShare: positive(o.newcomerShare, 0.5, 'newcomerShare', issues),
    idleAfterMs: positive(o.idleAfterMs, 2 * refreshMs, 'idleAfterMs', issues),
    abandonAfterMs: positive(o.abandonAfterMs, 60_000, 'abandonAfterMs', issues),
  };
  if (issues.length > 0) {
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_CONFIG_INVALID',
      `invalid quota controller options: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { issues },
    );
  }
  return Object.freeze(config);
}
