import { DECISION_MODES, type DecisionMode } from '../config/envoy/envoy-config.js';
import { PolicyError } from '../core/errors.js';
import { DEFAULT_NEAR_LIMIT_RATIO } from '../metrics/rule-hits.js';
import { DEFAULT_RESPONSE_HEADER_NAMES, type ResponseHeaderNames } from './response-headers.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Log levels `LOG_LEVEL` accepts (upstream's logrus names), as pino names them. */
const LOG_LEVELS: Readonly<Record<string, string>> = Object.freeze({
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  fatal: 'fatal',
  panic: 'fatal',
});

/** The service settings read from upstream's environment variables. */
export interface EnvSettings {
  readonly keyPrefix: string;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly mergeDomainConfig: boolean;
  readonly nearLimitRatio: number;
  /** Present when `LIMIT_RESPONSE_HEADERS_ENABLED` is true. */
  readonly responseHeaders?: ResponseHeaderNames;
  readonly responseDynamicMetadata: boolean;
  /** A pino level. */
  readonly logLevel: string;
  /** `LOG_FORMAT=text` was asked for; Sluice logs JSON only and says so at start. */
  readonly logFormatText: boolean;
  /** `SLUICE_DECISION_MODE`: how envoy requests are charged where a domain does not say. */
  readonly decisionMode: DecisionMode;
}

function invalid(name: string, value: string, expected: string): PolicyError {
  return new PolicyError(
    'SLUICE_ERR_CONFIG_INVALID',
    `${name}=${JSON.stringify(value)}: expected ${expected}`,
  );
}

/** Go's `strconv.ParseBool`, which upstream's settings use: anything else is an error. */
function bool(env: Env, name: string): boolean {
  const v = env[name];
  if (v === undefined || v === '') return false;
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(v)) return false;
  throw invalid(name, v, 'a boolean (true/false, 1/0, t/f)');
}

function headerName(env: Env, name: string, fallback: string): string {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  // RFC 9110 field-name: a token.
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(v)) throw invalid(name, v, 'an HTTP header name');
  return v;
}

/**
 * Reads upstream's service settings (`CACHE_KEY_PREFIX`, `SHADOW_MODE`, `QUOTA_MODE`,
 * `MERGE_DOMAIN_CONFIG`, `NEAR_LIMIT_RATIO`, `LIMIT_RESPONSE_HEADERS_ENABLED` and the
 * three `LIMIT_*_HEADER` names, `RESPONSE_DYNAMIC_METADATA`, `LOG_LEVEL`, `LOG_FORMAT`).
 * A value that cannot be read is an error naming the variable, never a silent default.
 */
export function settingsFromEnv(env: Env): EnvSettings {
  const prefix = env['CACHE_KEY_PREFIX'];
  if (prefix === '') throw invalid('CACHE_KEY_PREFIX', '', 'a non-empty key prefix');
  const ratioText = env['NEAR_LIMIT_RATIO'];
  let nearLimitRatio = DEFAULT_NEAR_LIMIT_RATIO;
  if (ratioText !== undefined && ratioText !== '') {
    nearLimitRatio = Number(ratioText);
    if (!/^\s*[0-9.eE+-]+\s*$/.test(ratioText) || !(nearLimitRatio > 0 && nearLimitRatio <= 1))
      throw invalid('NEAR_LIMIT_RATIO', ratioText, 'a number in (0, 1]');
  }
  const levelText = env['LOG_LEVEL'];
  let logLevel = 'info';
  if (levelText !== undefined && levelText !== '') {
    const level = LOG_LEVELS[levelText.toLowerCase()];
    if (level === undefined)
      throw invalid('LOG_LEVEL', levelText, Object.keys(LOG_LEVELS).join(', '));
    logLevel = level;
  }
  const format = env['LOG_FORMAT'];
  if (format !== undefined && format !== '' && !['json', 'text'].includes(format.toLowerCase()))
    throw invalid('LOG_FORMAT', format, 'json or text');
  const mode = env['SLUICE_DECISION_MODE'];
  if (mode !== undefined && mode !== '' && !(DECISION_MODES as readonly string[]).includes(mode))
    throw invalid('SLUICE_DECISION_MODE', mode, DECISION_MODES.join(' or '));
  const headersOn = bool(env, 'LIMIT_RESPONSE_HEADERS_ENABLED');
  return {
    keyPrefix: prefix ?? 'sl',
    shadowMode: bool(env, 'SHADOW_MODE'),
    quotaMode: bool(env, 'QUOTA_MODE'),
    mergeDomainConfig: bool(env, 'MERGE_DOMAIN_CONFIG'),
    nearLimitRatio,
    ...(headersOn
      ? {
          responseHeaders: {
            limit: headerName(env, 'LIMIT_LIMIT_HEADER', DEFAULT_RESPONSE_HEADER_NAMES.limit),
            remaining: headerName(
              env,
              'LIMIT_REMAINING_HEADER',
              DEFAULT_RESPONSE_HEADER_NAMES.remaining,
            ),
            reset: headerName(env, 'LIMIT_RESET_HEADER', DEFAULT_RESPONSE_HEADER_NAMES.reset),
          },
        }
      : {}),
    responseDynamicMetadata: bool(env, 'RESPONSE_DYNAMIC_METADATA'),
    logLevel,
    logFormatText: format?.toLowerCase() === 'text',
    decisionMode: mode === undefined || mode === '' ? 'per-descriptor' : (mode as DecisionMode),
  };
}
