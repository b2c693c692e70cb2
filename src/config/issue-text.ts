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

/**
 * A zod error map that says each problem plainly, for `path: problem` lines in config
 * messages (`missing; expected a list`, `unknown key "bursts"`, `must be > 0`). Messages
 * a schema sets itself take precedence over it, as zod applies them first.
 */
export function issueText(iss: RawIssue): string | undefined {
  switch (iss.code) {
    case 'invalid_type': {
      const noun = NOUNS[iss.expected] ?? `a ${iss.expected}`;
      return iss.input === undefined
        ? `missing; expected ${noun}`
        : `expected ${noun}, got ${described(iss.input)}`;
    }
    case 'unrecognized_keys':
      return `unknown key${iss.keys.length === 1 ? '' : 's'} ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}`;
    case 'too_small':
      return bound(iss, iss.minimum, false);
    case 'too_big':
      return bound(iss, iss.maximum, true);
    case 'invalid_value':
      return iss.values.length === 1
        ? `expected ${JSON.stringify(iss.values[0])}, got ${described(iss.input)}`
        : `expected one of ${iss.values.map((v) => JSON.stringify(v)).join(', ')}, got ${described(iss.input)}`;
    case 'not_multiple_of':
      return `must be a multiple of ${String(iss.divisor)}`;
    case 'invalid_union': {
      // Every form refused the value's type: name the forms.
      const forms = iss.errors.map((branch) => {
        const first = branch[0];
        return branch.length === 1 && first?.code === 'invalid_type' && first.path.length === 0
          ? (NOUNS[first.expected] ?? `a ${first.expected}`)
          : undefined;
      });
      if (forms.length === 0 || forms.includes(undefined)) {
        return `matches none of the allowed forms, got ${described(iss.input)}`;
      }
      return `expected ${forms.join(' or ')}, got ${described(iss.input)}`;
    }
    default:
      return undefined;
  }
}
