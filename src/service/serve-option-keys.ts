import type { PolicyIssue } from '../core/errors.js';
import type { ServeOptions } from './serve-options.js';

/**
 * Every key {@link ServeOptions} has, checked both ways by the compiler: a key added to
 * the interface must be added here. `startService` refuses any other key, since an
 * object spread or a JavaScript caller bypasses TypeScript's excess-property check
 * (a stale `redisUrl` once left a service silently on its memory store).
 */
const SERVE_OPTION_KEYS: Readonly<Record<string, true>> = Object.freeze({
  host: true,
  port: true,
  grpcHost: true,
  grpcPort: true,
  redis: true,
  redisTls: true,
  grpcTls: true,
  keyPrefix: true,
  shadowMode: true,
  quotaMode: true,
  nearLimitRatio: true,
  localCacheSizeBytes: true,
  responseHeaders: true,
  responseDynamicMetadata: true,
  decisionMode: true,
  shutdownTimeoutMs: true,
  logger: true,
  storeTimeoutMs: true,
  clock: true,
  maxSeriesPerMetric: true,
  httpHeadersTimeoutMs: true,
  httpRequestTimeoutMs: true,
  httpKeepAliveTimeoutMs: true,
  decisionLogSampleRate: true,
  hotKeys: true,
  xds: true,
  statsd: true,
  tracing: true,
  grpcUds: true,
  grpcMaxConnectionAgeMs: true,
  grpcMaxConnectionAgeGraceMs: true,
  healthyWithAtLeastOneConfigLoaded: true,
  debug: true,
  redisTimeoutMs: true,
  redisPerSecond: true,
  leases: true,
  envoyConfig: true,
  policiesFile: true,
  mergeDomainConfig: true,
  env: true,
  envoyFromXds: true,
  maxDescriptors: true,
  maxDescriptorEntries: true,
  maxDescriptorKeyLength: true,
  maxDescriptorValueLength: true,
} satisfies Record<keyof ServeOptions, true>);

/** Options since renamed, with what replaced them. */
const RENAMED: Readonly<Record<string, string>> = {
  redisUrl: "redis: { type: 'single', url }",
  redisCluster: "redis: { type: 'cluster', nodes }",
  redisSentinel: "redis: { type: 'sentinel', name, sentinels }",
  perSecondRedis: 'redisPerSecond',
};

/** One issue per key of `options` that `ServeOptions` does not have, in the given order. */
export function unknownServeOptionKeys(options: object): PolicyIssue[] {
  return Object.keys(options)
    .filter((key) => SERVE_OPTION_KEYS[key] !== true)
    .map((key) => {
      const now = RENAMED[key];
      return {
        path: key,
        message: `startService has no option "${key}"${now === undefined ? '' : ` (now ${now})`}`,
      };
    });
}
