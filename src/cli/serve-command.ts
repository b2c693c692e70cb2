import type { Command } from 'commander';
import type {
  FlagValue,
  ServiceSettings,
  SettingKey,
  XdsSettings,
} from '../service/env-settings.js';
import type { ServeOptions } from '../service/main.js';
import { MAX_STORE_TIMEOUT_MS } from '../service/store-timeout-limit.js';

/**
 * `sluice serve`: the rate limit service. Its settings module is imported first and the
 * service itself (gRPC, HTTP, the stores) only once the settings are valid, so that a
 * bad flag or variable stops the start without loading the service, and other commands
 * load neither.
 */
export function addServeCommand(program: Command, fail: (error: unknown) => never): void {
  const env = process.env;
  program
    .command('serve')
    .description(
      'Run the rate limit service: envoy RLS v3 gRPC, HTTP /json, /v1/check, /healthcheck, /metrics, /rlconfig',
    )
    .option(
      '--config <path>',
      'envoyproxy/ratelimit YAML file or directory (default: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY)',
    )
    .option('--policies <file>', 'Sluice-native policy file for /v1/check and sluice.v1')
    .option('--port <n>', 'HTTP port, 0-65535, 0 for any free one (env PORT; default 8080)')
    .option('--grpc-port <n>', 'gRPC port, 0-65535 (env GRPC_PORT; default 8081)')
    .option('--host <addr>', 'HTTP bind address (env HOST; default 0.0.0.0)')
    .option('--grpc-host <addr>', 'gRPC bind address (env GRPC_HOST; default 0.0.0.0)')
    .option(
      '--redis <url>',
      'Redis host:port or redis:// URL (env REDIS_URL; REDIS_AUTH, REDIS_TYPE, for Sentinel REDIS_SENTINEL_AUTH); default: the embedded memory store',
    )
    .option(
      '--redis-cluster <host:port,...>',
      'Redis Cluster seed nodes, comma-separated (or env REDIS_TYPE=cluster with REDIS_URL as the list; REDIS_AUTH applies)',
    )
    .option(
      '--store-timeout <ms>',
      `store deadline for envoy rules, 1-${MAX_STORE_TIMEOUT_MS} ms (env STORE_TIMEOUT_MS; default 100)`,
    )
    .option(
      '--max-descriptors <n>',
      'most descriptors in one request (env SLUICE_MAX_DESCRIPTORS; default 64)',
    )
    .option(
      '--max-descriptor-entries <n>',
      'most entries in one descriptor (env SLUICE_MAX_DESCRIPTOR_ENTRIES; default 32)',
    )
    .option(
      '--max-descriptor-key-length <n>',
      'longest entry key (env SLUICE_MAX_DESCRIPTOR_KEY_LENGTH; default 256)',
    )
    .option(
      '--max-descriptor-value-length <n>',
      'longest entry value (env SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH; default 1024)',
    )
    .option(
      '--http-headers-timeout <ms>',
      'time a client has to send its request headers, then 408 (env SLUICE_HTTP_HEADERS_TIMEOUT_MS; default 10000)',
    )
    .option(
      '--http-request-timeout <ms>',
      'time a client has to send a whole request, then 408 (env SLUICE_HTTP_REQUEST_TIMEOUT_MS; default 30000)',
    )
    .option(
      '--http-keep-alive-timeout <ms>',
      'how long an idle keep-alive connection stays open (env SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS; default 5000)',
    )
    .option(
      '--lease-controllers <host:port,...>',
      'take quota leases from these `sluice controller`s, tried in turn (env SLUICE_LEASE_CONTROLLERS)',
    )
    .option(
      '--lease-policies <name,...>',
      'the rules or policies decided by a lease, by public name (env SLUICE_LEASE_POLICIES)',
    )
    .option(
      '--lease-domain <domain>',
      "the controller's --domain (env SLUICE_LEASE_DOMAIN; default sluice)",
    )
    .option(
      '--lease-agent <name>',
      'this instance among the agents (env SLUICE_LEASE_AGENT; default <hostname>-<pid>-<random>, new at each start)',
    )
    .option(
      '--lease-token-file <file>',
      "a file holding this instance's bearer token for the controllers, read at each connect (env SLUICE_LEASE_TOKEN_FILE)",
    )
    .option(
      '--lease-refresh <ms>',
      "report period and lease window, the controller's --refresh-ms (env SLUICE_LEASE_REFRESH_MS; default 1000)",
    )
    .option(
      '--lease-ttl <ms>',
      "the longest a lease is held (env SLUICE_LEASE_TTL_MS; default the controller's TTL)",
    )
    .option(
      '--lease-fallback <deny|store|rate>',
      'without a lease in force: deny, the store, or a static rate per second (env SLUICE_LEASE_FALLBACK; default deny)',
    )
    .action(
      async (o: {
        config?: string;
        policies?: string;
        port?: string;
        grpcPort?: string;
        host?: string;
        grpcHost?: string;
        redis?: string;
        redisCluster?: string;
        storeTimeout?: string;
        maxDescriptors?: string;
        maxDescriptorEntries?: string;
        maxDescriptorKeyLength?: string;
        maxDescriptorValueLength?: string;
        httpHeadersTimeout?: string;
        httpRequestTimeout?: string;
        httpKeepAliveTimeout?: string;
        leaseControllers?: string;
        leasePolicies?: string;
        leaseDomain?: string;
        leaseAgent?: string;
        leaseTokenFile?: string;
        leaseRefresh?: string;
        leaseTtl?: string;
        leaseFallback?: string;
      }) => {
        try {
          // Flags and environment variables go through one validation, before anything
          // else: a bad value stops the start, naming the flag or variable.
          const { readServiceSettings } = await import('../service/env-settings.js');
          const flags: FlagValue[] = [];
          const flag = (setting: SettingKey, name: string, value: string | undefined): void => {
            if (value !== undefined) flags.push({ setting, flag: name, value });
          };
          flag('port', '--port', o.port);
          flag('grpcPort', '--grpc-port', o.grpcPort);
          flag('host', '--host', o.host);
          flag('grpcHost', '--grpc-host', o.grpcHost);
          flag('redisUrl', '--redis', o.redis);
          flag('redisUrl', '--redis-cluster', o.redisCluster);
          flag(
            'redisType',
            '--redis-cluster',
            o.redisCluster === undefined ? undefined : 'cluster',
          );
          flag('storeTimeoutMs', '--store-timeout', o.storeTimeout);
          flag('maxDescriptors', '--max-descriptors', o.maxDescriptors);
          flag('maxDescriptorEntries', '--max-descriptor-entries', o.maxDescriptorEntries);
          flag('maxDescriptorKeyLength', '--max-descriptor-key-length', o.maxDescriptorKeyLength);
          flag(
            'maxDescriptorValueLength',
            '--max-descriptor-value-length',
            o.maxDescriptorValueLength,
          );
          flag('httpHeadersTimeoutMs', '--http-headers-timeout', o.httpHeadersTimeout);
          flag('httpRequestTimeoutMs', '--http-request-timeout', o.httpRequestTimeout);
          flag('httpKeepAliveTimeoutMs', '--http-keep-alive-timeout', o.httpKeepAliveTimeout);
          flag('leaseControllers', '--lease-controllers', o.leaseControllers);
          flag('leasePolicies', '--lease-policies', o.leasePolicies);
          flag('leaseDomain', '--lease-domain', o.leaseDomain);
          flag('leaseAgent', '--lease-agent', o.leaseAgent);
          flag('leaseTokenFile', '--lease-token-file', o.leaseTokenFile);
          flag('leaseRefreshMs', '--lease-refresh', o.leaseRefresh);
          flag('leaseTtlMs', '--lease-ttl', o.leaseTtl);
          flag('leaseFallback', '--lease-fallback', o.leaseFallback);
          const settings = readServiceSettings(env, flags);
          const [{ startService }, { pino }] = await Promise.all([
            import('../service/main.js'),
            import('pino'),
          ]);
          const logger = pino({ name: 'sluice', level: settings.logLevel });
          if (settings.logFormatText)
            logger.warn('LOG_FORMAT=text: Sluice writes JSON logs only; logging JSON');
          const target = settings.redis;
          const running = await startService({
            ...(o.config === undefined ? {} : { envoyConfig: o.config }),
            ...(o.policies === undefined ? {} : { policiesFile: o.policies }),
            ...(target === undefined
              ? {}
              : target.type === 'single'
                ? { redisUrl: target.url }
                : target.type === 'sentinel'
                  ? { redisSentinel: target }
                  : { redisCluster: target }),
            ...(settings.redisTls === undefined ? {} : { redisTls: settings.redisTls }),
            ...(settings.grpcTls === undefined ? {} : { grpcTls: settings.grpcTls }),
            port: settings.port,
            grpcPort: settings.grpcPort,
            host: settings.host,
            grpcHost: settings.grpcHost,
            storeTimeoutMs: settings.storeTimeoutMs,
            maxDescriptors: settings.maxDescriptors,
            maxDescriptorEntries: settings.maxDescriptorEntries,
            maxDescriptorKeyLength: settings.maxDescriptorKeyLength,
            maxDescriptorValueLength: settings.maxDescriptorValueLength,
            ...(settings.httpHeadersTimeoutMs === undefined
              ? {}
              : { httpHeadersTimeoutMs: settings.httpHeadersTimeoutMs }),
            ...(settings.httpRequestTimeoutMs === undefined
              ? {}
              : { httpRequestTimeoutMs: settings.httpRequestTimeoutMs }),
            ...(settings.httpKeepAliveTimeoutMs === undefined
              ? {}
              : { httpKeepAliveTimeoutMs: settings.httpKeepAliveTimeoutMs }),
            keyPrefix: settings.keyPrefix,
            shadowMode: settings.shadowMode,
            quotaMode: settings.quotaMode,
            mergeDomainConfig: settings.mergeDomainConfig,
            nearLimitRatio: settings.nearLimitRatio,
            localCacheSizeBytes: settings.localCacheSizeBytes,
            ...(settings.responseHeaders === undefined
              ? {}
              : { responseHeaders: settings.responseHeaders }),
            responseDynamicMetadata: settings.responseDynamicMetadata,
            decisionMode: settings.decisionMode,
            decisionLogSampleRate: settings.decisionLogSampleRate,
            ...(settings.xds === undefined ? {} : { xds: await xdsOptions(settings.xds) }),
            ...(settings.statsd === undefined ? {} : { statsd: settings.statsd }),
            ...(settings.tracing === undefined ? {} : { tracing: settings.tracing }),
            healthyWithAtLeastOneConfigLoaded: settings.healthyWithAtLeastOneConfigLoaded,
            ...(settings.grpcUds === undefined ? {} : { grpcUds: settings.grpcUds }),
            grpcMaxConnectionAgeMs: settings.grpcMaxConnectionAgeMs,
            grpcMaxConnectionAgeGraceMs: settings.grpcMaxConnectionAgeGraceMs,
            ...(settings.debug === undefined ? {} : { debug: settings.debug }),
            ...(settings.redisPerSecond === undefined
              ? {}
              : { perSecondRedis: settings.redisPerSecond }),
            ...(settings.redisTimeoutMs === undefined
              ? {}
              : { redisTimeoutMs: settings.redisTimeoutMs }),
            ...(settings.leases === undefined
              ? {}
              : { leases: await leaseOptions(settings.leases) }),
            logger,
          });
          const stop = (): void => {
            void running.shutdown().then(() => process.exit(0));
          };
          process.once('SIGTERM', stop);
          process.once('SIGINT', stop);
        } catch (error) {
          fail(error);
        }
      },
    );
}

/** The xDS settings with their TLS files read. */
async function xdsOptions(xds: XdsSettings): Promise<NonNullable<ServeOptions['xds']>> {
  const { tls, ...rest } = xds;
  if (tls === undefined) return rest;
  const { readXdsTlsFiles } = await import('../service/xds/xds-tls-files.js');
  return { ...rest, tls: readXdsTlsFiles(tls) };
}

/** The lease settings with their TLS files read. */
async function leaseOptions(
  leases: NonNullable<ServiceSettings['leases']>,
): Promise<NonNullable<ServeOptions['leases']>> {
  const { tlsFiles, ...rest } = leases;
  if (tlsFiles === undefined) return rest;
  const { readLeaseTlsFiles } = await import('../service/env-settings.js');
  return { ...rest, tls: readLeaseTlsFiles(tlsFiles) };
}
