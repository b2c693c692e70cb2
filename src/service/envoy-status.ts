import type { Decision } from '../core/decision.js';
import type { ResolvedLimit } from '../config/envoy/limit-override.js';
import {
  UNLIMITED_REMAINING,
  descriptorCode,
  type DescriptorOutcome,
} from '../config/envoy/overall.js';
import { durationUntilResetSeconds } from '../config/envoy/window.js';
import type { RuleUsage } from '../metrics/rule-hits.js';
import type { RlsDescriptorStatus, RlsUnit } from '../protocol/messages.js';

/**
 * One envoy descriptor's answer, as envoyproxy/ratelimit gives it, from the limiter's
 * decision of its rule (or none: no rule, replaced, unlimited, requests_per_unit 0), and
 * its usage for the hit statistics.
 */

/** A descriptor's status and, for a limited one, its usage. */
export interface DescriptorAnswer {
  readonly status: RlsDescriptorStatus;
  readonly usage?: RuleUsage;
}

/**
 * A descriptor's answer: `hits` is what the request asked for, `taken` what the decision
 * took from the counter.
 */
export function descriptorStatus(
  r: ResolvedLimit | undefined,
  replaced: boolean,
  decision: Decision | undefined,
  hits: number,
  taken: number,
  nowMs: number,
): DescriptorAnswer {
  if (r === undefined || replaced) return { status: { code: 'OK', limitRemaining: 0 } };
  const rule = r.rule;
  if (rule.unlimited) return { status: { code: 'OK', limitRemaining: UNLIMITED_REMAINING } };
  const currentLimit = {
    ...(rule.name === '' ? {} : { name: rule.name }),
    requestsPerUnit: rule.requestsPerUnit,
    unit: (rule.unit ?? 'second').toUpperCase() as RlsUnit,
  };
  // Upstream reports whole seconds to the end of the epoch-aligned window.
  const resetMs =
    rule.sluice.algorithm === 'fixed-window' || decision === undefined
      ? durationUntilResetSeconds(rule.unit!, nowMs) * 1_000
      : decision.resetAfterMs;
  if (decision === undefined) {
    // requests_per_unit 0: upstream's "deny everything"
    return {
      status: {
        code: descriptorCode(true, rule.shadowMode),
        currentLimit,
        limitRemaining: 0,
        durationUntilResetMs: resetMs,
      },
      usage: { limit: 0, usedBefore: 0, hits, shadow: rule.shadowMode },
    };
  }
  // Upstream reports 0 left for a descriptor over its limit, whatever the counter holds.
  const remaining =
    decision.status === 'OVER_LIMIT' ? 0 : Math.max(0, Math.floor(decision.remaining + 1e-9));
  // A denial reports the capacity it found: the counter before this request.
  const usedBefore = decision.limit - decision.remaining - taken;
  return {
    status: {
      code: descriptorCode(decision.status === 'OVER_LIMIT', rule.shadowMode),
      currentLimit,
      limitRemaining: remaining,
      durationUntilResetMs: resetMs,
    },
    usage: {
      limit: decision.limit,
      usedBefore: Math.max(0, usedBefore),
      hits,
      shadow: rule.shadowMode,
    },
  };
}

/** What the overall answer needs of a descriptor's answer. */
export function outcomeOf(
  r: ResolvedLimit | undefined,
  replaced: boolean,
  status: RlsDescriptorStatus,
): DescriptorOutcome {
  return {
    code: status.code,
    unlimited: r?.rule.unlimited === true && !replaced,
    quotaMode: r?.rule.quotaMode === true,
    hasLimit: status.currentLimit !== undefined,
    remaining: status.limitRemaining,
  };
}
