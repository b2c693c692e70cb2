import type { z } from 'zod';

type RawIssue = z.core.$ZodRawIssue;

const NOUNS: Readonly<Record<string, string>> = Object.freeze({
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping (key: value)',
  record: 'a mapping (key: value)',
  map: 'a mapping (key: value)',
});

const nounOf = (expected: string): string => NOUNS[expected] ?? `a ${expected}`;

/** `a.b[0].c`, as config messages write paths. */
function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  }
  return out;
}

/** What a value is, for `got ...`: the text of a scalar, the kind of a collection. */
function described(input: unknown): string {
  if (input === null) return 'null (an empty value)';
  if (Array.isArray(input)) return 'a list';
  if (typeof input === 'object') return 'a mapping';
  if (typeof input === 'string') {
    return JSON.stringify(input.length > 60 ? `${input.slice(0, 60)}...` : input);
  }
  return String(input);
}

function bound(
  iss: { origin?: string; inclusive?: boolean },
  limit: unknown,
  over: boolean,
): string | undefined {
  const n = Number(limit);
  switch (iss.origin) {
    case 'number':
    case 'int':
    case 'bigint':
      return `must be ${over ? '<' : '>'}${iss.inclusive === false ? '' : '='} ${String(limit)}`;
    case 'array':
    case 'set':
      if (over) return `has at most ${n} entr${n === 1 ? 'y' : 'ies'}`;
      return `needs at least ${n} entr${n === 1 ? 'y' : 'ies'}`;
    case 'string':
      if (!over && n === 1) return 'must not be empty';
      return `must be at ${over ? 'most' : 'least'} ${n} character${n === 1 ? '' : 's'}`;
    default:
      return undefined;
  }
}

/** A union refused the value: say what the form that was meant needs. */
function unionText(iss: z.core.$ZodRawIssue<z.core.$ZodIssueInvalidUnion>): string {
  // A form that refused only the value's type was not meant; when exactly one form took
  // the type, its problem is the one to tell (`rules: expected a list, got 3`).
  const typeOnly = (branch: readonly z.core.$ZodIssue[]): boolean =>
    branch.length === 1 && branch[0]!.code === 'invalid_type' && branch[0]!.path.length === 0;
  const meant = iss.errors.filter((branch) => !typeOnly(branch));
  const first = meant.length === 1 ? meant[0]![0] : undefined;
  if (first !== undefined) {
    return first.path.length === 0 ? first.message : `${pathText(first.path)}: ${first.message}`;
  }
  if (meant.length === 0 && iss.errors.length > 0) {
    const forms = iss.errors.map((b) => nounOf((b[0] as z.core.$ZodIssueInvalidType).expected));
    return `expected ${forms.join(' or ')}, got ${described(iss.input)}`;
  }
  return `matches none of the allowed forms, got ${described(iss.input)}`;
}

/**
 * A zod error map that says each problem plainly, for `path: problem` lines in config
 * messages (`missing; expected a list`, `unknown key "bursts"`, `must be > 0`). Messages
 * a schema sets itself take precedence over it, as zod applies them first.
 */
export function issueText(iss: RawIssue): string | undefined {
  switch (iss.code) {
    case 'invalid_type':
      return iss.input === undefined
        ? `missing; expected ${nounOf(iss.expected)}`
        : `expected ${nounOf(iss.expected)}, got ${described(iss.input)}`;
    case 'unrecognized_keys':
      return `unknown key${iss.keys.length === 1 ? '' : 's'} ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}`;
    case 'too_small':
      return bound(iss, iss.minimum, false);
    case 'too_big':
      return bound(iss, iss.maximum, true);
    case 'invalid_value': {
      const got = described(iss.input);
      return iss.values.length === 1
        ? `expected ${JSON.stringify(iss.values[0])}, got ${got}`
        : `expected one of ${iss.values.map((v) => JSON.stringify(v)).join(', ')}, got ${got}`;
    }
    case 'not_multiple_of':
      return `must be a multiple of ${String(iss.divisor)}`;
    case 'invalid_union':
      return unionText(iss);
    default:
      return undefined;
  }
}
