import {
  readGrpcClientTlsFiles,
  type GrpcClientTls,
  type GrpcClientTlsFiles,
} from './grpc-client-tls.js';
import type { DecisionMode } from '../config/envoy/envoy-config.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../core/errors.js';
import type { GrpcTlsSettings } from './grpc/tls-credentials.js';
import { redisTargetFromSettings, type RedisTarget } from './redis-settings.js';
import type { RedisTlsSettings } from './redis-tls.js';
import type { ResponseHeaderNames } from './response-headers.js';
import type { XdsOptions } from './xds/xds-config-client.js';
import type { StatsdOptions } from '../metrics/statsd/statsd-stats.js';
import type { TracingOptions } from './tracing/service-tracing.js';
import type { ServeLeaseOptions } from './lease-agents.js';
import type { ServeOptions } from './serve-options.js';
import { unknownServeOptionKeys } from './serve-option-keys.js';
import {
  SERVICE_SETTINGS,
  SETTING_ENTRIES,
  serviceSettingsSchema,
  type ParsedSettings as Parsed,
  type SettingKey,
} from './settings/table.js';

export { SERVICE_SETTINGS, serviceSettingsSchema, type SettingKey };
export { MAX_STORE_TIMEOUT_MS } from './store-timeout-limit.js';
export {
  MAX_DESCRIPTOR_LIMIT,
  MAX_HTTP_TIMEOUT_MS,
  MAX_LEASE_REFRESH_MS,
  MAX_LOCAL_CACHE_BYTES,
} from './settings/values.js';

type Env = Readonly<Record<string, string | undefined>>;

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
  const { tree, open } = buildOptions(v);
  // What several settings make together.
  if (redis !== undefined) tree['redis'] = redis;
  if (redisPerSecond !== undefined) tree['redisPerSecond'] = redisPerSecond;
  const redisTlsOn = v.redisTls || (redis?.type === 'single' && redis.url.startsWith('rediss://'));
  if (redis !== undefined && redisTlsOn) open.add('redisTls');
  if (v.useDogStatsd) setPath(tree, 'statsd.flavor', 'dogstatsd');
  else setPath(tree, 'statsd.flavor', 'statsd');
  // The OTLP defaults: 4318 for HTTP, 4317 for gRPC.
  setPath(
    tree,
    'tracing.endpoint',
    v.otlpEndpoint ??
      (v.tracingProtocol === 'grpc' ? 'http://localhost:4317' : 'http://localhost:4318'),
  );
  if (v.leasePolicies !== undefined)
    setPath(tree, 'leases.policiesSetting', result.source['leasePolicies']!);
  else open.delete('leases');
  return deepFreeze(closeGroups(tree, open)) as Readonly<ServiceSettings>;
}

/** The groups (`xds`, `statsd`, ...) some setting can turn on, by path. */
const GROUPS: readonly string[] = [
  'redisTls',
  ...new Set(SETTING_ENTRIES.flatMap(([, spec]) => (spec.opens === undefined ? [] : [spec.opens]))),
];

/**
 * Writes each setting's value at its target path, and says which groups the values
 * turn on. A group no setting turns on is dropped by {@link closeGroups}.
 */
function buildOptions(v: Parsed): { tree: Record<string, unknown>; open: Set<string> } {
  const tree: Record<string, unknown> = {};
  const open = new Set<string>();
  for (const [key, spec] of SETTING_ENTRIES) {
    const value = v[key];
    if (spec.opens !== undefined && (spec.on ?? ((x: unknown) => x === true))(value as never))
      open.add(spec.opens);
    if (spec.target === undefined || value === undefined) continue;
    if (spec.omitEmpty === true && value === '') continue;
    setPath(tree, spec.target, value);
  }
  return { tree, open };
}

function setPath(tree: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = tree;
  for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
  node[parts.at(-1)!] = value;
}

/** Drops the groups that are not on, deepest first (`xds.tls` before `xds`). */
function closeGroups(
  tree: Record<string, unknown>,
  open: ReadonlySet<string>,
): Record<string, unknown> {
  for (const group of [...GROUPS].sort((a, b) => b.length - a.length)) {
    if (open.has(group)) continue;
    const parts = group.split('.');
    let node: Record<string, unknown> | undefined = tree;
    for (const part of parts.slice(0, -1))
      node = node?.[part] as Record<string, unknown> | undefined;
    if (node !== undefined) delete node[parts.at(-1)!];
  }
  return tree;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
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
const CHECKED_OPTIONS = SETTING_ENTRIES.filter(([, spec]) => spec.checksOption === true).map(
  ([key, spec]) => ({ key, path: spec.target! }),
);

/**
 * Checks the `ServeOptions` fields that a variable or flag can also set, by the rules
 * those follow, so that `startService({ storeTimeoutMs: 0 })` is refused as
 * `STORE_TIMEOUT_MS=0` is. Throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`) naming
 * each option.
 */
export function checkServeOptionValues(options: object): void {
  const given = CHECKED_OPTIONS.flatMap(({ key, path }) => {
    const value = path
      .split('.')
      .reduce<unknown>((o, p) => (o as Record<string, unknown> | undefined)?.[p], options);
    return value === undefined ? [] : [{ setting: key, flag: path, value: String(value) }];
  });
  const result = parse(
    given.map((g) => g.setting),
    {},
    given,
  );
  if ('issues' in result) refuse(result.issues);
}

/** The `ServeOptions` fields a setting gives a default to. */
type Defaulted = {
  [K in keyof ServiceSettings]-?: object extends Pick<ServiceSettings, K> ? never : K;
}[keyof ServiceSettings] &
  keyof ServeOptions;

/** The defaults of the settings whose target is a top-level `ServeOptions` field. */
const OPTION_DEFAULTS: Readonly<Record<string, unknown>> = Object.freeze(
  Object.fromEntries(
    SETTING_ENTRIES.flatMap(([key, spec]) => {
      const target = spec.target;
      if (target === undefined || target.includes('.') || !('default' in spec)) return [];
      if (key === 'logLevel' || key === 'logFormat') return []; // the CLI's, not the service's
      const value: unknown = serviceSettingsSchema.shape[key].parse(undefined);
      return spec.omitEmpty === true && value === '' ? [] : [[target, value]];
    }),
  ),
);

/**
 * `options` checked by the settings' rules ({@link checkServeOptionValues}) with the
 * settings' defaults for what they leave out: `startService` and `sluice serve` start
 * the same service from the same defaults.
 */
export function resolveServeOptions(
  options: ServeOptions,
): ServeOptions & Required<Pick<ServeOptions, Defaulted>> {
  const unknown = unknownServeOptionKeys(options);
  if (unknown.length > 0) refuse(unknown);
  checkServeOptionValues(options);
  return { ...OPTION_DEFAULTS, ...options } as ServeOptions &
    Required<Pick<ServeOptions, Defaulted>>;
}

/** Every setting's top-level target is a `ServeOptions` field, but the CLI's log settings. */
type NotAnOption = Exclude<
  keyof ServiceSettings,
  keyof ServeOptions | 'logLevel' | 'logFormatText'
>;
export const EVERY_TARGET_IS_AN_OPTION: [NotAnOption] extends [never] ? true : NotAnOption = true;
