/**
 * Scalar typing as envoyproxy/ratelimit sees it. Upstream reads its YAML with
 * gopkg.in/yaml.v2, which types plain scalars by YAML 1.1 rules (`yes` is a bool,
 * `0x10` an int, `2024-01-02` a timestamp) before its own checks run. To give the same
 * verdicts and messages we type scalars the same way here, and print values the way
 * Go's `%v` does.
 */

/** Go type a scalar decodes to when the target is `interface{}`. */
export type GoKind = 'string' | 'int' | 'uint64' | 'float64' | 'bool' | 'nil';

/** A typed scalar. `value` is exact: ints are bigints. */
export interface TypedScalar {
  /** Short tag, e.g. `!!str`, `!!int`, `!!timestamp`, or a custom `!local` tag. */
  readonly tag: string;
  readonly kind: GoKind;
  readonly value: string | bigint | number | boolean | null;
}

const BOOL_TRUE = new Set([
  'y',
  'Y',
  'yes',
  'Yes',
  'YES',
  'true',
  'True',
  'TRUE',
  'on',
  'On',
  'ON',
]);
const BOOL_FALSE = new Set([
  'n',
  'N',
  'no',
  'No',
  'NO',
  'false',
  'False',
  'FALSE',
  'off',
  'Off',
  'OFF',
]);
const NULLS = new Set(['', '~', 'null', 'Null', 'NULL']);
const SPECIAL_FLOATS: Readonly<Record<string, number>> = {
  '.nan': NaN,
  '.NaN': NaN,
  '.NAN': NaN,
  '.inf': Infinity,
  '.Inf': Infinity,
  '.INF': Infinity,
  '+.inf': Infinity,
  '+.Inf': Infinity,
  '+.INF': Infinity,
  '-.inf': -Infinity,
  '-.Inf': -Infinity,
  '-.INF': -Infinity,
};
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const DOT_FLOAT = /^\.[0-9]+([eE][-+]?[0-9]+)?$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

const LONG_TAG_PREFIX = 'tag:yaml.org,2002:';

/** `tag:yaml.org,2002:int` → `!!int`; other tags unchanged. */
export function shortTag(tag: string): string {
  return tag.startsWith(LONG_TAG_PREFIX) ? `!!${tag.slice(LONG_TAG_PREFIX.length)}` : tag;
}

const str = (text: string): TypedScalar => ({ tag: '!!str', kind: 'string', value: text });

/**
 * Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` base detection: optional sign (signed
 * only), then `0x`, `0o`, `0b` or a leading `0` (octal), else decimal.
 */
function parseGoInt(s: string, signed: boolean): bigint | undefined {
  let rest = s;
  let negative = false;
  if (signed && (rest.startsWith('+') || rest.startsWith('-'))) {
    negative = rest.startsWith('-');
    rest = rest.slice(1);
  }
  let digits = rest;
  let pattern = /^[0-9]+$/;
  let prefix = '';
  const lower = rest.slice(0, 2).toLowerCase();
  if (lower === '0x') [digits, pattern, prefix] = [rest.slice(2), /^[0-9a-fA-F]+$/, '0x'];
  else if (lower === '0o') [digits, pattern, prefix] = [rest.slice(2), /^[0-7]+$/, '0o'];
  else if (lower === '0b') [digits, pattern, prefix] = [rest.slice(2), /^[01]+$/, '0b'];
  else if (rest.length > 1 && rest.startsWith('0')) {
    [digits, pattern, prefix] = [rest.slice(1), /^[0-7]+$/, '0o'];
  }
  if (!pattern.test(digits)) return undefined;
  const magnitude = BigInt(prefix + digits);
  const v = negative ? -magnitude : magnitude;
  if (signed ? v < INT64_MIN || v > INT64_MAX : v > UINT64_MAX) return undefined;
  return v;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

const TS_DATE = /^(\d{4})-(\d{1,2})-(\d{1,2})$/;
const TS_ZONED =
  /^(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const TS_SPACED = /^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?$/;

/** yaml.v2's timestamp forms: date, RFC 3339 with `T`/`t`, or space-separated without zone. */
function isTimestamp(s: string): boolean {
  const m = TS_DATE.exec(s) ?? TS_ZONED.exec(s) ?? TS_SPACED.exec(s);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (m[4] === undefined) return true;
  return Number(m[4]) < 24 && Number(m[5]) < 60 && Number(m[6]) < 60;
}

function intScalar(v: bigint): TypedScalar {
  return v > INT64_MAX
    ? { tag: '!!int', kind: 'uint64', value: v }
    : { tag: '!!int', kind: 'int', value: v };
}

/** Resolves a plain (unquoted, untagged) scalar the way yaml.v2 does. */
function resolvePlain(text: string): TypedScalar {
  if (NULLS.has(text)) return { tag: '!!null', kind: 'nil', value: null };
  if (BOOL_TRUE.has(text)) return { tag: '!!bool', kind: 'bool', value: true };
  if (BOOL_FALSE.has(text)) return { tag: '!!bool', kind: 'bool', value: false };
  const special = SPECIAL_FLOATS[text];
  if (special !== undefined) return { tag: '!!float', kind: 'float64', value: special };
  if (text === '<<') return { tag: '!!merge', kind: 'string', value: text };
  const first = text[0] ?? '';
  if (first === '.') {
    const f = Number(text);
    return DOT_FLOAT.test(text) && Number.isFinite(f)
      ? { tag: '!!float', kind: 'float64', value: f }
      : str(text);
  }
  if (!/[-+0-9]/.test(first)) return str(text);
  if (isTimestamp(text)) return { tag: '!!timestamp', kind: 'string', value: text };
  const plain = text.replaceAll('_', '');
  const signed = parseGoInt(plain, true);
  if (signed !== undefined) return intScalar(signed);
  const unsigned = parseGoInt(plain, false);
  if (unsigned !== undefined) return intScalar(unsigned);
  if (YAML_STYLE_FLOAT.test(plain)) {
    const f = Number(plain);
    // Go's ParseFloat fails on overflow, and yaml.v2 then keeps the text as a string.
    if (Number.isFinite(f)) return { tag: '!!float', kind: 'float64', value: f };
  }
  return str(text);
}

/**
 * Types a scalar as yaml.v2 does. `tag` is the explicit tag (long or short form) or
 * `undefined`; `plain` says whether it was written unquoted (quoted and block scalars
 * without a tag are always strings). Returns an error message for a tag its text does
 * not fit (`!!int abc`), worded like yaml.v2's.
 */
export function typeScalar(
  text: string,
  tag: string | undefined,
  plain: boolean,
): TypedScalar | { readonly error: string } {
  if (tag === undefined || tag === '!') return plain ? resolvePlain(text) : str(text);
  const short = shortTag(tag);
  switch (short) {
    case '!!str':
    case '!!binary':
      return { ...str(text), tag: short };
    case '!!int':
    case '!!float':
    case '!!bool':
    case '!!null':
    case '!!timestamp': {
      const r = resolvePlain(text);
      if (r.tag === short) return r;
      if (short === '!!float' && r.tag === '!!int') {
        return { tag: '!!float', kind: 'float64', value: Number(r.value) };
      }
      if (short === '!!timestamp' && r.tag === '!!str') return r;
      return { error: `cannot decode ${r.tag} \`${text}\` as a ${short}` };
    }
    default:
      return { tag: short, kind: 'string', value: text };
  }
}

/** Go's `%v` for a float64: shortest digits, exponent form below 1e-4 and from 1e6. */
export function goFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return '+Inf';
  if (x === -Infinity) return '-Inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const [mantissa = '', expText = '0'] = x.toExponential().split('e');
  const exp = Number(expText);
  if (exp < -4 || exp >= 6) {
    const sign = exp < 0 ? '-' : '+';
    return `${mantissa}e${sign}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  let out: string;
  if (exp < 0) out = `0.${'0'.repeat(-exp - 1)}${digits}`;
  else if (digits.length <= exp + 1) out = digits + '0'.repeat(exp + 1 - digits.length);
  else out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  return negative ? `-${out}` : out;
}
