import { PolicyError } from '../core/errors.js';

/**
 * Checks a numeric option given to an overload class in code; throws a `PolicyError`
 * (`SLUICE_ERR_OVERLOAD_CONFIG_INVALID`) naming the option, its range and the value.
 */
export function checkRange(
  owner: string,
  name: string,
  value: number | undefined,
  min: number,
  max: number,
  minExclusive = false,
): void {
  if (value === undefined) return;
  const low = minExclusive ? value > min : value >= min;
  if (typeof value !== 'number' || !low || !(value <= max)) {
    const range = `${minExclusive ? '(' : '['}${min}, ${max === Infinity ? '∞)' : `${max}]`}`;
    throw new PolicyError(
      'SLUICE_ERR_OVERLOAD_CONFIG_INVALID',
      `${owner}: ${name} must be in ${range}, got ${String(value)}`,
    );
  }
}
