import { z } from 'zod';
import { MAX_STORE_TIMEOUT_MS } from './store-timeout-limit.js';
import {
  anyText,
  fraction,
  goBool,
  goDuration,
  goDurationMs,
  keyValueList,
  headerName,
  hostAddress,
  oneOf,
  portNumber,
  nonEmptyText,
  ratio,
  settingValue,
  wholeNumber,
  type SettingValue,
} from '../config/env-values.js';
import { DECISION_MODES, type DecisionMode } from '../config/envoy/envoy-config.js';
import { ENVOY_RUNTIME_DEFAULTS } from '../config/envoy/runtime-dir.js';
import { DEFAULT_DESCRIPTOR_LIMITS } from '../core/descriptor-limits.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../core/errors.js';
import { DEFAULT_DECISION_LOG_SAMPLE_RATE } from './decision-log.js';
import { DEFAULT_NEAR_LIMIT_RATIO } from '../metrics/rule-hits.js';
import type { GrpcTlsSettings } from './grpc/tls-credentials.js';
import { redisTargetFromSettings, type RedisTarget } from './redis-settings.js';
import type { RedisTlsSettings } from './redis-tls.js';
import { DEFAULT_RESPONSE_HEADER_NAMES, type ResponseHeaderNames } from './response-headers.js';
import type { XdsOptions } from './xds/xds-config-client.js';
import type { StatsdOptions } from '../metrics/statsd/statsd-stats.js';
import type { TracingOptions } from './tracing/service-tracing.js';
import type { LeaseFallback } from '../quota/lease.js';
import type { ServeLeaseOptions } from './lease-agents.js';
import {
  readGrpcClientTlsFiles,
  type GrpcClientTls,
  type GrpcClientTlsFiles,
} from './grpc-client-tls.js';

type Env = Readonly<Record<string, string | undefined>>;

/** One service setting: where it is read from and how. */
export interface SettingSpec {
  /** The environment variable. */
  readonly env: string;
  /** Command-line flags that set the same value (a flag wins over the variable). */
  readonly flags: readonly string[];
  /** Reads the text; unset (`undefined`) gives the default. */
  readonly value: z.ZodType<unknown, string | undefined>;
  /** envoyproxy/ratelimit reads the same variable (docs/migrating-from-envoy-ratelimit.md lists it). */
  readonly upstream: boolean;
}

function setting<T extends NonNullable<unknown>>(
  env: string,
  value: SettingValue<T>,
  fallback: T,
  more: { flags?: readonly string[]; upstream?: boolean } = {},
) {
  return {
    env,
    flags: more.flags ?? [],
    upstream: more.upstream ?? true,
    value: value.default(fallback),
  } satisfies SettingSpec;
}

function optionalSetting<T>(
  env: string,
  value: SettingValue<T>,
  more: { flags?: readonly string[]; upstream?: boolean } = {},
) {
  return {
    env,
    flags: more.flags ?? [],
    upstream: more.upstream ?? true,
    value: value.optional(),
  } satisfies SettingSpec;
}

/** Log levels `LOG_LEVEL` accepts (upstream's logrus names, any case), as pino names them. */
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

/** The largest over-limit cache accepted, in bytes (1 GiB): it holds small entries only. */
export const MAX_LOCAL_CACHE_BYTES = 1_073_741_824;

/** A Go duration a Node timer can hold: at most 2^31 − 1 ms (about 24.8 days). */
const timerDuration = settingValue('a duration such as 10s or 24h, at most 596h', (t) => {
  const ms = goDurationMs(t);
  return ms !== undefined && ms <= 2 ** 31 - 1 ? ms : undefined;
});

export { MAX_STORE_TIMEOUT_MS };

/** The largest descriptor limit accepted (count or length). */
export const MAX_DESCRIPTOR_LIMIT = 1_000_000;

/** The longest HTTP server timeout accepted, in ms (an hour). */
export const MAX_HTTP_TIMEOUT_MS = 3_600_000;

const descriptorLimit = wholeNumber(1, MAX_DESCRIPTOR_LIMIT);
const httpTimeout = wholeNumber(1, MAX_HTTP_TIMEOUT_MS, ' of milliseconds');

const runtime = ENVOY_RUNTIME_DEFAULTS;

/** The longest lease refresh period accepted, in ms. */
export const MAX_LEASE_REFRESH_MS = 60_000;

/** Controllers: `host:port` items, comma-separated, tried in turn. */
const controllerList = settingValue(
  'comma-separated host:port addresses (port 1-65535)',
  (t): readonly string[] | undefined => {
    const items = t.split(',').map((i) => i.trim());
    return items.every((i) => {
      const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):([0-9]{1,5})$/.exec(i);
      return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65_535;
    })
      ? Object.freeze(items)
      : undefined;
  },
);

/** Policy or rule names, comma-separated, each non-empty. */
const nameList = settingValue(
  'comma-separated policy or rule names',
  (t): readonly string[] | undefined => {
    const items = t.split(',').map((i) => i.trim());
    return items.every((i) => i !== '') ? Object.freeze([...new Set(items)]) : undefined;
  },
);

/** A lease agent's fallback: `deny`, `store`, or a static rate in units per second. */
const leaseFallback = settingValue(
  'deny, store, or a static rate in units per second (a number ≥ 0)',
  (t): LeaseFallback | undefined => {
    const lower = t.toLowerCase();
    if (lower === 'deny' || lower === 'store') return Object.freeze({ kind: lower });
    const n = /^[0-9]+(\.[0-9]+)?$/.test(t) ? Number(t) : NaN;
    return Number.isFinite(n) ? Object.freeze({ kind: 'static', rate: n }) : undefined;
  },
);

/**
 * Every setting `sluice serve` reads, one entry per environment variable. To add one:
 * add an entry here (the variable, its flags, how its text is read, its default), a row
 * to the table in docs/cli.md (a test keeps the two equal) and, when upstream has the
 * variable, a row in docs/migrating-from-envoy-ratelimit.md.
 */
export const SERVICE_SETTINGS = {
  port: setting('PORT', portNumber, 8080, { flags: ['--port'] }),
  grpcPort: setting('GRPC_PORT', portNumber, 8081, { flags: ['--grpc-port'] }),
  host: setting('HOST', hostAddress, '0.0.0.0', { flags: ['--host'] }),
  grpcHost: setting('GRPC_HOST', hostAddress, '0.0.0.0', { flags: ['--grpc-host'] }),
  redisUrl: optionalSetting(
    'REDIS_URL',
    settingValue('host:port or a redis:// URL (unset: the embedded memory store)', (t) =>
      t === '' ? undefined : t,
    ),
    { flags: ['--redis', '--redis-cluster'] },
  ),
  redisAuth: setting('REDIS_AUTH', anyText, ''),
  redisType: setting(
    'REDIS_TYPE',
    oneOf({ single: 'single', cluster: 'cluster', sentinel: 'sentinel' } as const),
    'single',
  ),
  redisSentinelAuth: setting('REDIS_SENTINEL_AUTH', anyText, ''),
  redisTls: setting('REDIS_TLS', goBool, false),
  redisTlsCaCert: setting('REDIS_TLS_CACERT', anyText, ''),
  redisTlsClientCert: setting('REDIS_TLS_CLIENT_CERT', anyText, ''),
  redisTlsClientKey: setting('REDIS_TLS_CLIENT_KEY', anyText, ''),
  redisTlsSkipHostnameVerification: setting('REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', goBool, false),
  grpcServerUseTls: setting('GRPC_SERVER_USE_TLS', goBool, false),
  grpcServerTlsCert: setting('GRPC_SERVER_TLS_CERT', anyText, ''),
  grpcServerTlsKey: setting('GRPC_SERVER_TLS_KEY', anyText, ''),
  grpcClientTlsCaCert: setting('GRPC_CLIENT_TLS_CACERT', anyText, ''),
  grpcClientTlsSan: setting('GRPC_CLIENT_TLS_SAN', anyText, ''),
  storeTimeoutMs: setting(
    'STORE_TIMEOUT_MS',
    wholeNumber(1, MAX_STORE_TIMEOUT_MS, ' of milliseconds'),
    100,
    { flags: ['--store-timeout'], upstream: false },
  ),
  maxDescriptors: setting(
    'SLUICE_MAX_DESCRIPTORS',
    descriptorLimit,
    DEFAULT_DESCRIPTOR_LIMITS.maxDescriptors,
    { flags: ['--max-descriptors'], upstream: false },
  ),
  maxDescriptorEntries: setting(
    'SLUICE_MAX_DESCRIPTOR_ENTRIES',
    descriptorLimit,
    DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorEntries,
    { flags: ['--max-descriptor-entries'], upstream: false },
  ),
  maxDescriptorKeyLength: setting(
    'SLUICE_MAX_DESCRIPTOR_KEY_LENGTH',
    descriptorLimit,
    DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorKeyLength,
    { flags: ['--max-descriptor-key-length'], upstream: false },
  ),
  maxDescriptorValueLength: setting(
    'SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH',
    descriptorLimit,
    DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorValueLength,
    { flags: ['--max-descriptor-value-length'], upstream: false },
  ),
  // Unset: the HTTP server's own defaults (10 s, 30 s or the headers timeout, 5 s).
  httpHeadersTimeoutMs: optionalSetting('SLUICE_HTTP_HEADERS_TIMEOUT_MS', httpTimeout, {
    flags: ['--http-headers-timeout'],
    upstream: false,
  }),
  httpRequestTimeoutMs: optionalSetting('SLUICE_HTTP_REQUEST_TIMEOUT_MS', httpTimeout, {
    flags: ['--http-request-timeout'],
    upstream: false,
  }),
  httpKeepAliveTimeoutMs: optionalSetting('SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS', httpTimeout, {
    flags: ['--http-keep-alive-timeout'],
    upstream: false,
  }),
  keyPrefix: setting(
    'CACHE_KEY_PREFIX',
    settingValue('a non-empty key prefix without "{" or "}"', (t) =>
      t === '' || /[{}]/.test(t) ? undefined : t,
    ),
    'sl',
  ),
  shadowMode: setting('SHADOW_MODE', goBool, false),
  quotaMode: setting('QUOTA_MODE', goBool, false),
  mergeDomainConfig: setting('MERGE_DOMAIN_CONFIG', goBool, false, {
    flags: ['--merge-domain-configs'],
  }),
  nearLimitRatio: setting('NEAR_LIMIT_RATIO', ratio, DEFAULT_NEAR_LIMIT_RATIO),
  localCacheSizeBytes: setting(
    'LOCAL_CACHE_SIZE_IN_BYTES',
    wholeNumber(0, MAX_LOCAL_CACHE_BYTES, ' of bytes'),
    0,
  ),
  responseHeadersEnabled: setting('LIMIT_RESPONSE_HEADERS_ENABLED', goBool, false),
  limitHeader: setting('LIMIT_LIMIT_HEADER', headerName, DEFAULT_RESPONSE_HEADER_NAMES.limit),
  remainingHeader: setting(
    'LIMIT_REMAINING_HEADER',
    headerName,
    DEFAULT_RESPONSE_HEADER_NAMES.remaining,
  ),
  resetHeader: setting('LIMIT_RESET_HEADER', headerName, DEFAULT_RESPONSE_HEADER_NAMES.reset),
  responseDynamicMetadata: setting('RESPONSE_DYNAMIC_METADATA', goBool, false),
  logLevel: setting('LOG_LEVEL', oneOf(LOG_LEVELS), 'info'),
  logFormat: setting('LOG_FORMAT', oneOf({ json: 'json', text: 'text' } as const), 'json'),
  decisionLogSampleRate: setting(
    'SLUICE_LOG_SAMPLE_RATE',
    fraction,
    DEFAULT_DECISION_LOG_SAMPLE_RATE,
    { upstream: false },
  ),
  runtimeRoot: setting('RUNTIME_ROOT', anyText, runtime.runtimeRoot),
  runtimeSubdirectory: setting('RUNTIME_SUBDIRECTORY', anyText, runtime.runtimeSubdirectory),
  runtimeAppDirectory: setting('RUNTIME_APPDIRECTORY', anyText, runtime.runtimeAppDirectory),
  runtimeWatchRoot: setting('RUNTIME_WATCH_ROOT', goBool, runtime.runtimeWatchRoot),
  runtimeIgnoreDotFiles: setting('RUNTIME_IGNOREDOTFILES', goBool, runtime.runtimeIgnoreDotFiles),
  decisionMode: setting(
    'SLUICE_DECISION_MODE',
    oneOf(
      Object.fromEntries(DECISION_MODES.map((m) => [m, m])) as Record<DecisionMode, DecisionMode>,
      DECISION_MODES.join(' or '),
    ),
    'per-descriptor' as DecisionMode,
    { upstream: false },
  ),
  configType: setting(
    'CONFIG_TYPE',
    oneOf({ file: 'FILE', grpc_xds_sotw: 'GRPC_XDS_SOTW' } as const, 'FILE or GRPC_XDS_SOTW'),
    'FILE',
  ),
  forceStartWithoutInitialConfig: setting('FORCE_START_WITHOUT_INITIAL_CONFIG', goBool, false),
  xdsServerUrl: setting(
    'CONFIG_GRPC_XDS_SERVER_URL',
    nonEmptyText('a gRPC target such as host:port'),
    'localhost:18000',
  ),
  xdsNodeId: setting('CONFIG_GRPC_XDS_NODE_ID', anyText, 'default'),
  xdsNodeMetadata: setting('CONFIG_GRPC_XDS_NODE_METADATA', keyValueList('='), {}),
  xdsHeaders: setting('CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS', keyValueList(':'), {}),
  xdsServerUseTls: setting('CONFIG_GRPC_XDS_SERVER_USE_TLS', goBool, false),
  xdsClientTlsCert: setting('CONFIG_GRPC_XDS_CLIENT_TLS_CERT', anyText, ''),
  xdsClientTlsKey: setting('CONFIG_GRPC_XDS_CLIENT_TLS_KEY', anyText, ''),
  xdsServerTlsCaCert: setting('CONFIG_GRPC_XDS_SERVER_TLS_CACERT', anyText, ''),
  xdsServerTlsSan: setting('CONFIG_GRPC_XDS_SERVER_TLS_SAN', anyText, ''),
  xdsBackoffInitialMs: setting('XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', goDuration, 10_000),
  xdsBackoffMaxMs: setting('XDS_CLIENT_BACKOFF_MAX_INTERVAL', goDuration, 60_000),
  xdsBackoffRandomFactor: setting('XDS_CLIENT_BACKOFF_RANDOM_FACTOR', fraction, 0.5),
  xdsBackoffJitter: setting('XDS_CLIENT_BACKOFF_JITTER', goBool, true),
  xdsMaxMessageBytes: setting(
    'XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES',
    wholeNumber(0, 2 ** 31 - 1, ' of bytes'),
    0,
  ),
  useStatsd: setting('USE_STATSD', goBool, false),
  useDogStatsd: setting('USE_DOG_STATSD', goBool, false),
  statsdHost: setting('STATSD_HOST', hostAddress, 'localhost'),
  statsdPort: setting('STATSD_PORT', wholeNumber(1, 65_535), 8125),
  extraTags: setting('EXTRA_TAGS', keyValueList(':'), {}),
  statsFlushIntervalMs: setting('STATS_FLUSH_INTERVAL', goDuration, 10_000),
  tracingEnabled: setting('TRACING_ENABLED', goBool, false),
  tracingProtocol: setting(
    'TRACING_EXPORTER_PROTOCOL',
    oneOf({ http: 'http', grpc: 'grpc' } as const, 'http or grpc'),
    'http',
  ),
  tracingServiceName: setting('TRACING_SERVICE_NAME', anyText, 'RateLimit'),
  tracingServiceNamespace: setting('TRACING_SERVICE_NAMESPACE', anyText, ''),
  tracingServiceInstanceId: setting('TRACING_SERVICE_INSTANCE_ID', anyText, ''),
  tracingSamplingRate: setting('TRACING_SAMPLING_RATE', fraction, 1),
  otlpEndpoint: optionalSetting(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    settingValue('an http:// or https:// URL', (t) =>
      /^https?:\/\/[^/\s]+/.test(t) ? t : undefined,
    ),
  ),
  healthyWithAtLeastOneConfigLoaded: setting(
    'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED',
    goBool,
    false,
  ),
  grpcUds: setting('GRPC_UDS', anyText, ''),
  grpcMaxConnectionAgeMs: setting('GRPC_MAX_CONNECTION_AGE', timerDuration, 24 * 3_600_000),
  grpcMaxConnectionAgeGraceMs: setting('GRPC_MAX_CONNECTION_AGE_GRACE', timerDuration, 3_600_000),
  debugHost: setting('DEBUG_HOST', hostAddress, '0.0.0.0'),
  debugPort: optionalSetting('DEBUG_PORT', portNumber),
  redisTimeoutMs: optionalSetting(
    'REDIS_TIMEOUT',
    settingValue('a duration above 0 such as 250ms or 10s, at most 596h', (t) => {
      const ms = goDurationMs(t);
      return ms !== undefined && ms > 0 && ms <= 2 ** 31 - 1 ? ms : undefined;
    }),
  ),
  redisPerSecond: setting('REDIS_PERSECOND', goBool, false),
  redisPerSecondUrl: optionalSetting(
    'REDIS_PERSECOND_URL',
    settingValue('host:port or a redis:// URL', (t) => (t === '' ? undefined : t)),
  ),
  redisPerSecondAuth: setting('REDIS_PERSECOND_AUTH', anyText, ''),
  redisPerSecondType: setting(
    'REDIS_PERSECOND_TYPE',
    oneOf({ single: 'single', cluster: 'cluster' } as const, 'single or cluster'),
    'single',
  ),
  leaseControllers: optionalSetting('SLUICE_LEASE_CONTROLLERS', controllerList, {
    flags: ['--lease-controllers'],
    upstream: false,
  }),
  leasePolicies: optionalSetting('SLUICE_LEASE_POLICIES', nameList, {
    flags: ['--lease-policies'],
    upstream: false,
  }),
  leaseDomain: setting('SLUICE_LEASE_DOMAIN', nonEmptyText('a non-empty RLQS domain'), 'sluice', {
    flags: ['--lease-domain'],
    upstream: false,
  }),
  leaseAgent: setting('SLUICE_LEASE_AGENT', anyText, '', {
    flags: ['--lease-agent'],
    upstream: false,
  }),
  leaseRefreshMs: setting(
    'SLUICE_LEASE_REFRESH_MS',
    wholeNumber(1, MAX_LEASE_REFRESH_MS, ' of milliseconds'),
    1_000,
    { flags: ['--lease-refresh'], upstream: false },
  ),
  leaseTtlMs: optionalSetting(
    'SLUICE_LEASE_TTL_MS',
    wholeNumber(1, 2 ** 31 - 1, ' of milliseconds'),
    { flags: ['--lease-ttl'], upstream: false },
  ),
  leaseFallback: setting(
    'SLUICE_LEASE_FALLBACK',
    leaseFallback,
    Object.freeze({ kind: 'deny' }) as LeaseFallback,
    { flags: ['--lease-fallback'], upstream: false },
  ),
  leaseTokenFile: setting('SLUICE_LEASE_TOKEN_FILE', anyText, '', {
    flags: ['--lease-token-file'],
    upstream: false,
  }),
  leaseTls: setting('SLUICE_LEASE_TLS', goBool, false, { upstream: false }),
  leaseTlsCaCert: setting('SLUICE_LEASE_TLS_CACERT', anyText, '', { upstream: false }),
  leaseTlsClientCert: setting('SLUICE_LEASE_TLS_CLIENT_CERT', anyText, '', { upstream: false }),
  leaseTlsClientKey: setting('SLUICE_LEASE_TLS_CLIENT_KEY', anyText, '', { upstream: false }),
  leaseTlsSan: setting('SLUICE_LEASE_TLS_SAN', anyText, '', { upstream: false }),
} as const;

export type SettingKey = keyof typeof SERVICE_SETTINGS;

type Shape = { [K in SettingKey]: (typeof SERVICE_SETTINGS)[K]['value'] };

/** The zod schema of the settings' text, keyed like {@link SERVICE_SETTINGS}. */
export const serviceSettingsSchema = z
  .object(
    Object.fromEntries(
      Object.entries(SERVICE_SETTINGS).map(([key, spec]) => [key, spec.value]),
    ) as Shape,
  )
  .strict();

/** A value given on the command line for a setting. */
export interface FlagValue {
  readonly setting: SettingKey;
  /** The flag as the user wrote it (`--port`), named in errors. */
  readonly flag: string;
  readonly value: string;
}

/** The validated settings of `sluice serve`. */
export interface ServiceSettings {
  readonly port: number;
  readonly grpcPort: number;
  readonly host: string;
  readonly grpcHost: string;
  /** Absent: the embedded memory store. */
  readonly redis?: RedisTarget;
  /** TLS to Redis: `REDIS_TLS=true` or a `rediss://` URL, with the `REDIS_TLS_*` files. */
  readonly redisTls?: RedisTlsSettings;
  /** TLS (and mutual TLS) of the gRPC server: `GRPC_SERVER_USE_TLS=true`. */
  readonly grpcTls?: GrpcTlsSettings;
  readonly storeTimeoutMs: number;
  /** The descriptor limits (`SLUICE_MAX_DESCRIPTOR*`); see `DescriptorLimits`. */
  readonly maxDescriptors: number;
  readonly maxDescriptorEntries: number;
  readonly maxDescriptorKeyLength: number;
  readonly maxDescriptorValueLength: number;
  /** The HTTP server's timeouts in ms (`SLUICE_HTTP_*_TIMEOUT_MS`); absent: its defaults. */
  readonly httpHeadersTimeoutMs?: number;
  readonly httpRequestTimeoutMs?: number;
  readonly httpKeepAliveTimeoutMs?: number;
  readonly keyPrefix: string;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly mergeDomainConfig: boolean;
  readonly nearLimitRatio: number;
  /** Upstream's `LOCAL_CACHE_SIZE_IN_BYTES`: the over-limit cache's bound; 0 is off. */
  readonly localCacheSizeBytes: number;
  /** Present when `LIMIT_RESPONSE_HEADERS_ENABLED` is true. */
  readonly responseHeaders?: ResponseHeaderNames;
  readonly responseDynamicMetadata: boolean;
  /** A pino level. */
  readonly logLevel: string;
  /** `LOG_FORMAT=text` was asked for; Sluice logs JSON only and says so at start. */
  readonly logFormatText: boolean;
  /** `SLUICE_LOG_SAMPLE_RATE`: share of decisions logged, 0 to 1. */
  readonly decisionLogSampleRate: number;
  /** `SLUICE_DECISION_MODE`: how envoy requests are charged where a domain does not say. */
  readonly decisionMode: DecisionMode;
  /** Present when `CONFIG_TYPE=GRPC_XDS_SOTW`: rules come from this xDS server, not files. */
  readonly xds?: XdsSettings;
  /** Present when `USE_STATSD` or `USE_DOG_STATSD` is true. */
  readonly statsd?: StatsdSettings;
  /** Present when `TRACING_ENABLED` is true. */
  readonly tracing?: TracingOptions;
  readonly healthyWithAtLeastOneConfigLoaded: boolean;
  /** gRPC on this unix socket instead of TCP (`GRPC_UDS`); absent: TCP. */
  readonly grpcUds?: string;
  readonly grpcMaxConnectionAgeMs: number;
  readonly grpcMaxConnectionAgeGraceMs: number;
  /** Present when `DEBUG_PORT` is set. */
  readonly debug?: { readonly host: string; readonly port: number };
  /** `REDIS_TIMEOUT`: how long a Redis call may go unanswered before the connection is reopened. */
  readonly redisTimeoutMs?: number;
  /** Present when `REDIS_PERSECOND` is true: the Redis for rules whose unit is second. */
  readonly redisPerSecond?: RedisTarget;
  /** Present when `SLUICE_LEASE_CONTROLLERS` is set: this service is a quota lease agent. */
  readonly leases?: Omit<ServeLeaseOptions, 'tls'> & {
    readonly policiesSetting: string;
    /** With `SLUICE_LEASE_TLS=true`: the files, read at start (`readLeaseTlsFiles`). */
    readonly tlsFiles?: GrpcClientTlsFiles;
  };
}

/** Where upstream's stats go, besides Prometheus. */
export type StatsdSettings = Omit<StatsdOptions, 'nearLimitRatio' | 'onError'>;

/** The xDS subscription's settings, TLS files named (read at start). */
export interface XdsSettings extends Omit<XdsOptions, 'tls'> {
  /** Serve (empty) before the first config arrives (`FORCE_START_WITHOUT_INITIAL_CONFIG`). */
  readonly forceStart: boolean;
  /** Absent: plaintext. Paths are '' when unset. */
  readonly tls?: GrpcClientTlsFiles;
}

type Parsed = z.output<typeof serviceSettingsSchema>;

/**
 * Reads and validates `keys` from flags (which win) and environment variables. Returns
 * the values, or every problem found, each naming the flag or variable it came from.
 */
function parse(
  keys: readonly SettingKey[],
  env: Env,
  flags: readonly FlagValue[],
): { values: Parsed; source: Record<string, string> } | { issues: PolicyIssue[] } {
  const raw: Record<string, string | undefined> = {};
  const source: Record<string, string> = {};
  const issues: PolicyIssue[] = [];
  for (const key of keys) {
    const given = flags.filter((f) => f.setting === key);
    if (given.length > 1) {
      issues.push({
        path: given.map((f) => f.flag).join(', '),
        message: 'give only one of these',
      });
    }
    const flag = given[0];
    raw[key] = flag === undefined ? env[SERVICE_SETTINGS[key].env] : flag.value;
    source[key] = flag === undefined ? SERVICE_SETTINGS[key].env : flag.flag;
  }
  const mask = Object.fromEntries(keys.map((k) => [k, true])) as Record<SettingKey, true>;
  const parsed = serviceSettingsSchema.pick(mask).safeParse(raw);
  if (!parsed.success) {
    for (const i of parsed.error.issues) {
      issues.push({ path: source[String(i.path[0])] ?? '', message: i.message });
    }
  }
  if (issues.length > 0 || !parsed.success) return { issues };
  return { values: parsed.data as Parsed, source };
}

function refuse(issues: readonly PolicyIssue[]): never {
  throw new PolicyError(
    'SLUICE_ERR_CONFIG_INVALID',
    `invalid settings (${issues.length} issue${issues.length === 1 ? '' : 's'}):\n` +
      issues.map((i) => `  ${formatIssue(i)}`).join('\n'),
    { issues },
  );
}

/**
 * Reads every setting of `sluice serve` from the environment and from `flags`, with
 * one validation for both. Throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`) listing
 * every problem at once; each issue's path names the variable, or the flag when the
 * value came from one (`PORT`, `--store-timeout`).
 */
export function readServiceSettings(
  env: Env,
  flags: readonly FlagValue[] = [],
): Readonly<ServiceSettings> {
  const result = parse(Object.keys(SERVICE_SETTINGS) as SettingKey[], env, flags);
  const issues = 'issues' in result ? [...result.issues] : [];
  // The URL's form depends on REDIS_TYPE: checked once the Redis settings read well,
  // whatever else is wrong, so that every problem is reported at once.
  const r = parse(['redisUrl', 'redisAuth', 'redisType', 'redisSentinelAuth'], env, flags);
  let redis: RedisTarget | undefined;
  if (!('issues' in r) && r.values.redisUrl !== undefined) {
    try {
      redis = redisTargetFromSettings({
        url: r.values.redisUrl,
        auth: r.values.redisAuth,
        type: r.values.redisType,
        sentinelAuth: r.values.redisSentinelAuth,
        urlSetting: r.source['redisUrl']!,
      });
    } catch (e) {
      if (!(e instanceof PolicyError)) throw e;
      issues.push(...e.issues);
    }
  }
  if (!('issues' in result)) {
    issues.push(...tlsIssues(result.values));
    const { httpHeadersTimeoutMs: headers, httpRequestTimeoutMs: request } = result.values;
    // Node refuses a headers timeout longer than the request timeout.
    if (headers !== undefined && request !== undefined && headers > request) {
      issues.push({
        path: result.source['httpHeadersTimeoutMs']!,
        message: `must not exceed ${result.source['httpRequestTimeoutMs']!} (${request}), got "${headers}"`,
      });
    }
  }
  let redisPerSecond: RedisTarget | undefined;
  if (!('issues' in result) && result.values.redisPerSecond) {
    const v = result.values;
    if (v.redisPerSecondUrl === undefined) {
      issues.push({
        path: 'REDIS_PERSECOND_URL',
        message: 'required when REDIS_PERSECOND is true',
      });
    } else {
      try {
        redisPerSecond = redisTargetFromSettings({
          url: v.redisPerSecondUrl,
          auth: v.redisPerSecondAuth,
          type: v.redisPerSecondType,
          urlSetting: 'REDIS_PERSECOND_URL',
        });
      } catch (e) {
        if (!(e instanceof PolicyError)) throw e;
        issues.push(...e.issues);
      }
    }
  }
  if (!('issues' in result) && result.values.useStatsd && result.values.useDogStatsd) {
    issues.push({
      path: 'USE_STATSD, USE_DOG_STATSD',
      message: 'set only one of them to true (one statsd sink at a time, as upstream)',
    });
  }
  if (!('issues' in result)) issues.push(...leaseIssues(result.values, result.source, env, flags));
  if ('issues' in result || issues.length > 0) refuse(issues);
  const v = result.values;
  const redisTlsOn = v.redisTls || (redis?.type === 'single' && redis.url.startsWith('rediss://'));
  return Object.freeze({
    port: v.port,
    grpcPort: v.grpcPort,
    host: v.host,
    grpcHost: v.grpcHost,
    ...(redis === undefined ? {} : { redis }),
    ...(redis === undefined || !redisTlsOn
      ? {}
      : {
          redisTls: Object.freeze({
            ...(v.redisTlsCaCert === '' ? {} : { caFile: v.redisTlsCaCert }),
            ...(v.redisTlsClientCert === '' ? {} : { certFile: v.redisTlsClientCert }),
            ...(v.redisTlsClientKey === '' ? {} : { keyFile: v.redisTlsClientKey }),
            skipHostnameVerification: v.redisTlsSkipHostnameVerification,
          }),
        }),
    ...(v.grpcServerUseTls
      ? {
          grpcTls: Object.freeze({
            certFile: v.grpcServerTlsCert,
            keyFile: v.grpcServerTlsKey,
            ...(v.grpcClientTlsCaCert === '' ? {} : { clientCaFile: v.grpcClientTlsCaCert }),
            ...(v.grpcClientTlsSan === '' ? {} : { clientSan: v.grpcClientTlsSan }),
          }),
        }
      : {}),
    storeTimeoutMs: v.storeTimeoutMs,
    maxDescriptors: v.maxDescriptors,
    maxDescriptorEntries: v.maxDescriptorEntries,
    maxDescriptorKeyLength: v.maxDescriptorKeyLength,
    maxDescriptorValueLength: v.maxDescriptorValueLength,
    ...(v.httpHeadersTimeoutMs === undefined
      ? {}
      : { httpHeadersTimeoutMs: v.httpHeadersTimeoutMs }),
    ...(v.httpRequestTimeoutMs === undefined
      ? {}
      : { httpRequestTimeoutMs: v.httpRequestTimeoutMs }),
    ...(v.httpKeepAliveTimeoutMs === undefined
      ? {}
      : { httpKeepAliveTimeoutMs: v.httpKeepAliveTimeoutMs }),
    keyPrefix: v.keyPrefix,
    shadowMode: v.shadowMode,
    quotaMode: v.quotaMode,
    mergeDomainConfig: v.mergeDomainConfig,
    nearLimitRatio: v.nearLimitRatio,
    localCacheSizeBytes: v.localCacheSizeBytes,
    ...(v.responseHeadersEnabled
      ? {
          responseHeaders: Object.freeze({
            limit: v.limitHeader,
            remaining: v.remainingHeader,
            reset: v.resetHeader,
          }),
        }
      : {}),
    responseDynamicMetadata: v.responseDynamicMetadata,
    logLevel: v.logLevel,
    logFormatText: v.logFormat === 'text',
    decisionLogSampleRate: v.decisionLogSampleRate,
    decisionMode: v.decisionMode,
    ...(v.configType === 'GRPC_XDS_SOTW' ? { xds: xdsSettings(v) } : {}),
    ...(v.useStatsd || v.useDogStatsd
      ? {
          statsd: Object.freeze({
            flavor: v.useDogStatsd ? ('dogstatsd' as const) : ('statsd' as const),
            host: v.statsdHost,
            port: v.statsdPort,
            extraTags: v.extraTags,
            flushIntervalMs: v.statsFlushIntervalMs,
          }),
        }
      : {}),
    healthyWithAtLeastOneConfigLoaded: v.healthyWithAtLeastOneConfigLoaded,
    ...(v.grpcUds === '' ? {} : { grpcUds: v.grpcUds }),
    grpcMaxConnectionAgeMs: v.grpcMaxConnectionAgeMs,
    grpcMaxConnectionAgeGraceMs: v.grpcMaxConnectionAgeGraceMs,
    ...(v.debugPort === undefined
      ? {}
      : { debug: Object.freeze({ host: v.debugHost, port: v.debugPort }) }),
    ...(v.redisTimeoutMs === undefined ? {} : { redisTimeoutMs: v.redisTimeoutMs }),
    ...(redisPerSecond === undefined ? {} : { redisPerSecond }),
    ...(v.leaseControllers === undefined || v.leasePolicies === undefined
      ? {}
      : {
          leases: Object.freeze({
            controllers: v.leaseControllers,
            policies: v.leasePolicies,
            policiesSetting: result.source['leasePolicies']!,
            domain: v.leaseDomain,
            ...(v.leaseAgent === '' ? {} : { agent: v.leaseAgent }),
            refreshMs: v.leaseRefreshMs,
            ...(v.leaseTtlMs === undefined ? {} : { maxTtlMs: v.leaseTtlMs }),
            fallback: v.leaseFallback,
            ...(v.leaseTokenFile === '' ? {} : { tokenFile: v.leaseTokenFile }),
            ...(v.leaseTls
              ? {
                  tlsFiles: Object.freeze({
                    caCertFile: v.leaseTlsCaCert,
                    clientCertFile: v.leaseTlsClientCert,
                    clientKeyFile: v.leaseTlsClientKey,
                    serverName: v.leaseTlsSan,
                  }),
                }
              : {}),
          }),
        }),
    ...(v.tracingEnabled
      ? {
          tracing: Object.freeze({
            protocol: v.tracingProtocol,
            // The OTLP defaults: 4318 for HTTP, 4317 for gRPC.
            endpoint:
              v.otlpEndpoint ??
              (v.tracingProtocol === 'grpc' ? 'http://localhost:4317' : 'http://localhost:4318'),
            serviceName: v.tracingServiceName,
            serviceNamespace: v.tracingServiceNamespace,
            serviceInstanceId: v.tracingServiceInstanceId,
            samplingRate: v.tracingSamplingRate,
          }),
        }
      : {}),
  });
}

function xdsSettings(v: Parsed): XdsSettings {
  return Object.freeze({
    serverUrl: v.xdsServerUrl,
    nodeId: v.xdsNodeId,
    nodeMetadata: v.xdsNodeMetadata,
    headers: v.xdsHeaders,
    backoff: Object.freeze({
      initialMs: v.xdsBackoffInitialMs,
      maxMs: v.xdsBackoffMaxMs,
      randomFactor: v.xdsBackoffRandomFactor,
      jitter: v.xdsBackoffJitter,
    }),
    maxMessageBytes: v.xdsMaxMessageBytes,
    forceStart: v.forceStartWithoutInitialConfig,
    ...(v.xdsServerUseTls
      ? {
          tls: Object.freeze({
            caCertFile: v.xdsServerTlsCaCert,
            clientCertFile: v.xdsClientTlsCert,
            clientKeyFile: v.xdsClientTlsKey,
            serverName: v.xdsServerTlsSan,
          }),
        }
      : {}),
  });
}

const LEASE_KEYS = [
  'leasePolicies',
  'leaseDomain',
  'leaseAgent',
  'leaseRefreshMs',
  'leaseTtlMs',
  'leaseFallback',
  'leaseTokenFile',
  'leaseTls',
  'leaseTlsCaCert',
  'leaseTlsClientCert',
  'leaseTlsClientKey',
  'leaseTlsSan',
] as const satisfies readonly SettingKey[];

/** Lease settings that do not go together. */
function leaseIssues(
  v: Parsed,
  source: Record<string, string>,
  env: Env,
  flags: readonly FlagValue[],
): PolicyIssue[] {
  const given = (k: SettingKey): boolean =>
    flags.some((f) => f.setting === k) || env[SERVICE_SETTINGS[k].env] !== undefined;
  const controllers = source['leaseControllers']!;
  if (v.leaseControllers === undefined) {
    return LEASE_KEYS.filter(given).map((k) => ({
      path: source[k]!,
      message: `applies only with ${controllers} (the controllers to take leases from)`,
    }));
  }
  const issues: PolicyIssue[] = [];
  if (v.leasePolicies === undefined) {
    issues.push({
      path: source['leasePolicies']!,
      message: `required with ${controllers}: the policies or rules that take leases`,
    });
  }
  if (!v.leaseTls) {
    for (const k of [
      'leaseTlsCaCert',
      'leaseTlsClientCert',
      'leaseTlsClientKey',
      'leaseTlsSan',
    ] as const) {
      if (v[k] !== '')
        issues.push({ path: source[k]!, message: 'applies only with SLUICE_LEASE_TLS=true' });
    }
  }
  if (v.leaseTtlMs !== undefined && v.leaseTtlMs < v.leaseRefreshMs) {
    issues.push({
      path: source['leaseTtlMs']!,
      message: `must be at least ${source['leaseRefreshMs']!} (${v.leaseRefreshMs}): a lease must outlive the round that renews it, got "${v.leaseTtlMs}"`,
    });
  }
  return issues;
}

/** Reads the lease TLS files the settings name (`SLUICE_LEASE_TLS_*`). */
export function readLeaseTlsFiles(files: GrpcClientTlsFiles): GrpcClientTls {
  return readGrpcClientTlsFiles(files, {
    caCert: 'SLUICE_LEASE_TLS_CACERT',
    clientCert: 'SLUICE_LEASE_TLS_CLIENT_CERT',
    clientKey: 'SLUICE_LEASE_TLS_CLIENT_KEY',
  });
}

/** What is missing for the TLS settings that are on. */
function tlsIssues(v: Parsed): PolicyIssue[] {
  const issues: PolicyIssue[] = [];
  if (v.grpcServerUseTls) {
    for (const [env, value] of [
      ['GRPC_SERVER_TLS_CERT', v.grpcServerTlsCert],
      ['GRPC_SERVER_TLS_KEY', v.grpcServerTlsKey],
    ] as const) {
      if (value === '')
        issues.push({ path: env, message: 'required with GRPC_SERVER_USE_TLS=true' });
    }
  } else if (v.grpcClientTlsCaCert !== '' || v.grpcClientTlsSan !== '') {
    issues.push({
      path: v.grpcClientTlsCaCert !== '' ? 'GRPC_CLIENT_TLS_CACERT' : 'GRPC_CLIENT_TLS_SAN',
      message: 'applies only with GRPC_SERVER_USE_TLS=true',
    });
  }
  if (v.grpcClientTlsSan !== '' && v.grpcClientTlsCaCert === '') {
    issues.push({
      path: 'GRPC_CLIENT_TLS_SAN',
      message: 'needs GRPC_CLIENT_TLS_CACERT (client certificates are asked for only then)',
    });
  }
  if ((v.redisTlsClientCert === '') !== (v.redisTlsClientKey === '')) {
    issues.push({
      path: v.redisTlsClientCert === '' ? 'REDIS_TLS_CLIENT_CERT' : 'REDIS_TLS_CLIENT_KEY',
      message: 'give both REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY, or neither',
    });
  }
  return issues;
}

/**
 * Reads one setting the way {@link readServiceSettings} does (for commands that need
 * only that one, like `validate` with `MERGE_DOMAIN_CONFIG`).
 */
export function readSetting<K extends SettingKey>(
  key: K,
  env: Env,
  flags: readonly FlagValue[] = [],
): Parsed[K] {
  const result = parse([key], env, flags);
  if ('issues' in result) refuse(result.issues);
  return result.values[key];
}

/** The `ServeOptions` fields that are also settings, checked by the same rules. */
const CHECKED_OPTIONS = [
  'port',
  'grpcPort',
  'host',
  'grpcHost',
  'storeTimeoutMs',
  'maxDescriptors',
  'maxDescriptorEntries',
  'maxDescriptorKeyLength',
  'maxDescriptorValueLength',
  'httpHeadersTimeoutMs',
  'httpRequestTimeoutMs',
  'httpKeepAliveTimeoutMs',
  'keyPrefix',
  'nearLimitRatio',
  'localCacheSizeBytes',
  'decisionLogSampleRate',
] as const satisfies readonly SettingKey[];

/**
 * Checks the `ServeOptions` fields that a variable or flag can also set, by the rules
 * those follow, so that `startService({ storeTimeoutMs: 0 })` is refused as
 * `STORE_TIMEOUT_MS=0` is. Throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`) naming
 * each option.
 */
export function checkServeOptionValues(
  options: Readonly<Partial<Record<(typeof CHECKED_OPTIONS)[number], string | number>>>,
): void {
  const given = CHECKED_OPTIONS.filter((k) => options[k] !== undefined);
  const result = parse(
    given,
    {},
    given.map((k) => ({ setting: k, flag: k, value: String(options[k]) })),
  );
  if ('issues' in result) refuse(result.issues);
}
