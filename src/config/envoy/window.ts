import { unitToMs, unitToSeconds, type EnvoyUnit } from './envoy-config.js';

/**
 * Start of the epoch-aligned window of `unit` containing `nowMs`, in ms: windows are
 * `[k * unitMs, (k + 1) * unitMs)` counted from the Unix epoch (UTC), so a `day` window
 * starts at 00:00 UTC and a `month` window every 30 days from 1970-01-01.
 */
export function windowStartMs(unit: EnvoyUnit, nowMs: number): number {
  const len = unitToMs(unit);
  return Math.floor(nowMs / len) * len;
}

/** Time from `nowMs` to the end of its window, in ms; in `(0, unitMs]`. */
export function durationUntilResetMs(unit: EnvoyUnit, nowMs: number): number {
  return windowStartMs(unit, nowMs) + unitToMs(unit) - nowMs;
}

/**
 * Upstream's `duration_until_reset` (and `RateLimit-Reset` header) in whole seconds:
 * the unit's length minus the seconds elapsed in the window, with the current time
 * truncated to a whole second. In `[1, unitSeconds]`; equals
 * `ceil(durationUntilResetMs / 1000)`.
 */
export function durationUntilResetSeconds(unit: EnvoyUnit, nowMs: number): number {
  const len = unitToSeconds(unit);
  const nowS = Math.floor(nowMs / 1_000);
  return len - (((nowS % len) + len) % len);
}
