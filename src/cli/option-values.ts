import { InvalidArgumentError } from 'commander';

/** A commander parser for a whole-number option of at least `min`, naming the option. */
export function wholeNumber(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min)
      throw new InvalidArgumentError(`${name} must be a whole number >= ${min}`);
    return n;
  };
}

/** A commander parser for a finite number option above 0 (and at most `max`), naming the option. */
export function positiveNumber(name: string, max = Infinity) {
  return (v: string): number => {
    const n = /^\s*[0-9.eE+]+\s*$/.test(v) ? Number(v) : NaN;
    if (!(n > 0 && n <= max && Number.isFinite(n)))
      throw new InvalidArgumentError(
        `${name} must be a number > 0${max === Infinity ? '' : ` and <= ${max}`}`,
      );
    return n;
  };
}
