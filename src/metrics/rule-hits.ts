/**
 * How one check's hits split into envoyproxy/ratelimit's per-rule counters. The split
 * follows upstream's `src/limiter/base_limiter.go` (`GetResponseDescriptorStatus`,
 * `checkOverLimitThreshold`, `checkNearLimitThreshold`, `increaseShadowModeStats`), so
 * dashboards built for upstream read the same numbers from Sluice.
 */

/** A per-rule counter, named as upstream names its stats. */
export type RuleOutcome =
  'total_hits' | 'over_limit' | 'near_limit' | 'within_limit' | 'shadow_mode';

/** Every rule outcome, in a stable order. */
export const RULE_OUTCOMES: readonly RuleOutcome[] = Object.freeze([
  'total_hits',
  'over_limit',
  'near_limit',
  'within_limit',
  'shadow_mode',
]);

/**
 * The share of a rule's limit above which hits count as `near_limit`: upstream's
 * `NEAR_LIMIT_RATIO` setting and its default (`src/settings/settings.go`).
 */
export const DEFAULT_NEAR_LIMIT_RATIO = 0.8;

/** One rule's usage around one check, in the rule's units. */
export interface RuleUsage {
  /** The rule's limit (`requests_per_unit`), a whole number ≥ 0. */
  readonly limit: number;
  /**
   * Units already used in the rule's window before this check (`limit − remaining`
   * before it), ≥ 0. For a check that was admitted that is `limit − remainingAfter − hits`;
   * for one that was denied without consuming, `limit − remaining`.
   */
  readonly usedBefore: number;
  /** Units this check adds (`hits_addend`), ≥ 0. */
  readonly hits: number;
  /** The rule is in shadow mode: over-limit hits also count as `shadow_mode`. @default false */
  readonly shadow?: boolean;
}

/**
 * The hits that cross `ratio × limit`: `floor(limit × ratio)` computed in float32 as
 * upstream does (`float32(limit) * nearLimitRatio`), e.g. 8 for a limit of 10.
 */
export function nearLimitThreshold(
  limit: number,
  ratio: number = DEFAULT_NEAR_LIMIT_RATIO,
): number {
  return Math.floor(Math.fround(Math.fround(limit) * Math.fround(ratio)));
}

function check(v: number, name: string): number {
  if (!Number.isFinite(v) || v < 0) {
    throw new RangeError(`${name} must be a finite number >= 0, got ${v}`);
  }
  return v;
}

/**
 * Splits one check's hits into upstream's counters. The check is over limit when
 * `usedBefore + hits > limit`; the outcomes overlap as upstream's do:
 *
 * - `total_hits`: every hit.
 * - within limit: `within_limit` gets every hit; `near_limit` the hits above the
 *   near-limit threshold.
 * - over limit: `over_limit` gets the hits above the limit (all of them when the rule was
 *   already full); `near_limit` the hits between the threshold and the limit;
 *   `within_limit` nothing; in shadow mode `shadow_mode` gets the same as `over_limit`.
 *
 * Example, limit 10 (threshold 8), 7 used, 5 hits: 12 > 10 is over limit, so
 * `over_limit` = 12 − 10 = 2 and `near_limit` = 10 − max(8, 7) = 2; `within_limit` = 0.
 * Throws `RangeError` for a negative or non-finite number.
 */
export function ruleHits(
  usage: RuleUsage,
  nearLimitRatio: number = DEFAULT_NEAR_LIMIT_RATIO,
): Readonly<Record<RuleOutcome, number>> {
  const limit = check(usage.limit, 'limit');
  const before = check(usage.usedBefore, 'usedBefore');
  const hits = check(usage.hits, 'hits');
  const after = before + hits;
  const near = nearLimitThreshold(limit, nearLimitRatio);
  const out: Record<RuleOutcome, number> = {
    total_hits: hits,
    over_limit: 0,
    near_limit: 0,
    within_limit: 0,
    shadow_mode: 0,
  };
  if (after > limit) {
    if (before >= limit) out.over_limit = hits;
    else {
      out.over_limit = after - limit;
      out.near_limit = limit - Math.max(near, before);
    }
    if (usage.shadow === true) out.shadow_mode = out.over_limit;
  } else {
    if (after > near) out.near_limit = before >= near ? hits : after - near;
    out.within_limit = hits;
  }
  return out;
}
