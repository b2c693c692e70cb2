import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * How the text of one setting (an environment variable or a command-line flag) is
 * read. Each schema takes the raw string and either returns the value or adds one issue
 * whose message says what is allowed and what was given (`expected ..., got "abc"`).
 * The service settings (src/service/env-settings.ts) and the runtime-directory settings
 * (src/config/envoy/runtime-dir.ts) use these, so a variable is read one way everywhere.
 */
export type SettingValue<T> = z.ZodType<T, string>;

/** `expected <allowed>, got "<text>"`. */
export function expectedGot(allowed: string, text: string): string {
  return `expected ${allowed}, got ${JSON.stringify(text)}`;
}

/**
 * A schema that maps the text to a value, or to `undefined` when it is not allowed;
 * `allowed` completes the message `expected <allowed>, got "<text>"`.
 */
export function settingValue<T>(
  allowed: string,
  read: (text: string) => T | undefined,
): SettingValue<T> {
  return z.string().transform((text, ctx) => {
    const value = read(text);
    if (value !== undefined) return value;
    ctx.addIssue({ code: 'custom', message: expectedGot(allowed, text) });
    return z.NEVER;
  });
}

// Go's strconv.ParseBool, which envoyproxy/ratelimit's settings use (through
// kelseyhightower/envconfig): these twelve spellings and nothing else, not even ''.
const GO_TRUE = ['1', 't', 'T', 'TRUE', 'true', 'True'];
const GO_FALSE = ['0', 'f', 'F', 'FALSE', 'false', 'False'];

/** A boolean as upstream parses it: `1 t T TRUE true True`, `0 f F FALSE false False`. */
export const goBool: SettingValue<boolean> = settingValue(
  `a boolean (${[...GO_TRUE, ...GO_FALSE].join(', ')})`,
  (t) => (GO_TRUE.includes(t) ? true : GO_FALSE.includes(t) ? false : undefined),
);

/** A whole number written in decimal digits, within `[min, max]`. */
export function wholeNumber(min: number, max: number, unit = ''): SettingValue<number> {
  return settingValue(`a whole number${unit} from ${min} to ${max}`, (t) => {
    const n = /^[0-9]{1,16}$/.test(t) ? Number(t) : NaN;
    return n >= min && n <= max ? n : undefined;
  });
}

/** A TCP port; 0 asks the system for any free port. */
export const portNumber: SettingValue<number> = wholeNumber(0, 65_535);

// RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens.
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** A bind address: an IPv4 or IPv6 address (no brackets) or a host name. */
export const hostAddress: SettingValue<string> = settingValue(
  'an IP address or a host name',
  (t) => (isIP(t) !== 0 || HOST_NAME.test(t) ? t : undefined),
);

/** A number in (0, 1]. */
export const ratio: SettingValue<number> = settingValue(
  'a number greater than 0 and at most 1',
  (t) => {
    const n = /^\s*[0-9.eE+-]+\s*$/.test(t) ? Number(t) : NaN;
    return n > 0 && n <= 1 ? n : undefined;
  },
);

// RFC 9110 field-name: a token.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** An HTTP header (field) name. */
export const headerName: SettingValue<string> = settingValue(
  "an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)",
  (t) => (TOKEN.test(t) ? t : undefined),
);

/**
 * One of `choices`, compared without case; the result is `map[choice]` (so aliases can
 * share a meaning). `allowed` overrides the listed choices in the message.
 */
export function oneOf<T>(map: Readonly<Record<string, T>>, allowed?: string): SettingValue<T> {
  const choices = Object.keys(map);
  return settingValue(allowed ?? `one of ${choices.join(', ')}`, (t) => map[t.toLowerCase()]);
}

/** Any text, empty included. */
export const anyText: SettingValue<string> = z.string();

/** Any text but the empty string. */
export function nonEmptyText(allowed: string): SettingValue<string> {
  return settingValue(allowed, (t) => (t === '' ? undefined : t));
}

/** A share from 0 (never) to 1 (always), e.g. a sampling rate. */
export const fraction: SettingValue<number> = settingValue('a number from 0 to 1', (t) => {
  const n = /^\s*[0-9.eE+-]+\s*$/.test(t) ? Number(t) : NaN;
  return n >= 0 && n <= 1 ? n : undefined;
});
// Go's time.ParseDuration units, which upstream's duration settings use.
const GO_DURATION_UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** Reads Go's duration form (`10s`, `1h30m`, `250ms`, `0`) as milliseconds. */
export function goDurationMs(text: string): number | undefined {
  if (text === '0') return 0;
  const parts = /^(?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|ms|s|m|h))+$/.test(text)
    ? [...text.matchAll(/([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)/g)]
    : undefined;
  if (parts === undefined) return undefined;
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * GO_DURATION_UNIT_MS[unit!]!, 0);
}

/** A Go duration (`10s`, `1h30m`), as upstream writes its duration settings; read as ms. */
export const goDuration: SettingValue<number> = settingValue(
  'a duration such as 250ms, 10s or 1h30m',
  goDurationMs,
);

/**
 * A list of `key<sep>value` pairs separated by commas (empty: none), each key non-empty;
 * entries are kept in order, the last of a repeated key wins.
 */
export function keyValueList(sep: ':' | '='): SettingValue<Readonly<Record<string, string>>> {
  return settingValue(`comma-separated key${sep}value pairs`, (t) => {
    const out: Record<string, string> = {};
    if (t === '') return out;
    for (const entry of t.split(',')) {
      const at = entry.indexOf(sep);
      if (at <= 0) return undefined;
      out[entry.slice(0, at)] = entry.slice(at + 1);
    }
    return out;
  });
}
