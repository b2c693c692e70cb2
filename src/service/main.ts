import { pino, type Logger } from 'pino';
import type { DecisionMode } from '../config/envoy/envoy-config.js';
import type { Clock } from '../core/clock.js';
import { descriptorLimits, type DescriptorLimits } from '../core/descriptor-limits.js';
import { formatIssue, PolicyError, StoreError } from '../core/errors.js';
import { ServiceMetrics } from '../metrics/service-metrics.js';
import { StatsdStats, type StatsdOptions } from '../metrics/statsd/statsd-stats.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { RedisStore, type SentinelTarget } from '../stores/redis/redis-store.js';
import type { Store } from '../stores/store.js';
import { checkServeOptionValues } from './env-settings.js';
import { createGrpcServer } from './grpc/server.js';
import { ReloadingServerCredentials, type GrpcTlsSettings } from './grpc/tls-credentials.js';
import { redisTls as watchedRedisTls, type RedisTlsSettings } from './redis-tls.js';
import type { CallContext } from './grpc/handlers.js';
import { HttpServer } from './http/http-server.js';
import { RateLimitService } from './rate-limit-service.js';
import { waitForRedis } from './redis-wait.js';
import { StoreHealth } from './store-health.js';
import type { ResponseHeaderNames } from './response-headers.js';
import { ConfigWatcher } from './config-watcher.js';
import { loadServiceConfig, type ConfigSources, type LoadedConfig } from './service-config.js';
import { DecisionLog } from './decision-log.js';
import type { DecisionEvent } from './decision-event.js';
import { policiesInForce } from './status/policies-in-force.js';
import { ServiceStatus, type HotKeySource } from './status/service-status.js';
import { XdsConfigClient, type XdsOptions } from './xds/xds-config-client.js';
import { ServiceTracing, type TracingOptions } from './tracing/service-tracing.js';
import { TracedStore } from './tracing/traced-store.js';
import { ServiceHealth } from './service-health.js';
import type { RedisTarget } from './redis-settings.js';
import { DebugServer } from './http/debug-server.js';
import { systemClock } from '../core/clock.js';
import { LeaseAgents, type ServeLeaseOptions } from './lease-agents.js';
import { leasedPolicyProblems } from './leased-policies.js';

/**
 * Options of {@link startService}. The descriptor limits (`maxDescriptors` 64,
 * `maxDescriptorEntries` 32, `maxDescriptorKeyLength` 256, `maxDescriptorValueLength`
 * 1024; see `DescriptorLimits`) apply to every request, over gRPC and HTTP alike.
 */
export interface ServeOptions extends ConfigSources, Partial<DescriptorLimits> {
  /** HTTP bind address (`HOST`). @default "0.0.0.0" */
  readonly host?: string;
  /** HTTP port (`PORT`). @default 8080 */
  readonly port?: number;
  /** gRPC bind address (`GRPC_HOST`). @default "0.0.0.0" */
  readonly grpcHost?: string;
  /** gRPC port (`GRPC_PORT`). @default 8081 */
  readonly grpcPort?: number;
  /** Redis URL (`REDIS_URL`); absent (and no `redisCluster`): the embedded memory store. */
  readonly redisUrl?: string;
  /**
   * Redis Cluster seed nodes (`--redis-cluster`, or `REDIS_TYPE=cluster` with a
   * `REDIS_URL` list); the store decides on primaries only. Exclusive with `redisUrl`.
   */
  readonly redisCluster?: {
    readonly nodes: readonly { readonly host: string; readonly port: number }[];
    readonly username?: string;
    readonly password?: string;
  };
  /**
   * A primary found through Redis Sentinel (`REDIS_TYPE=sentinel`: `REDIS_URL` is the
   * master name then the Sentinels, `REDIS_SENTINEL_AUTH`). Exclusive with `redisUrl`
   * and `redisCluster`.
   */
  readonly redisSentinel?: SentinelTarget;
  /** TLS to Redis (`REDIS_TLS`, `REDIS_TLS_*`); the files are re-read when they change. */
  readonly redisTls?: RedisTlsSettings;
  /**
   * TLS of the gRPC server (`GRPC_SERVER_USE_TLS`, `GRPC_SERVER_TLS_CERT`,
   * `GRPC_SERVER_TLS_KEY`), mutual with `GRPC_CLIENT_TLS_CACERT`, and the client
   * certificate's name with `GRPC_CLIENT_TLS_SAN`; the files are re-read when they change.
   * @default plaintext
   */
  readonly grpcTls?: GrpcTlsSettings;
  /** Key prefix in Redis (`CACHE_KEY_PREFIX`). @default "sl" */
  readonly keyPrefix?: string;
  /** Upstream's `SHADOW_MODE`. @default false */
  readonly shadowMode?: boolean;
  /** Upstream's `QUOTA_MODE`. @default false */
  readonly quotaMode?: boolean;
  /** Upstream's `NEAR_LIMIT_RATIO`, for the `near_limit` counters. @default 0.8 */
  readonly nearLimitRatio?: number;
  /**
   * Upstream's `LOCAL_CACHE_SIZE_IN_BYTES`: bytes of the over-limit cache (a bucket the
   * store just denied is denied in process until its retry time); 0 is off. @default 0
   */
  readonly localCacheSizeBytes?: number;
  /** Upstream's `LIMIT_RESPONSE_HEADERS_ENABLED` with the header names. @default off */
  readonly responseHeaders?: ResponseHeaderNames;
  /** Upstream's `RESPONSE_DYNAMIC_METADATA`. @default false */
  readonly responseDynamicMetadata?: boolean;
  /**
   * How envoy requests are charged where a domain's `sluice.decision` does not say
   * (`SLUICE_DECISION_MODE`). @default "per-descriptor" (as envoyproxy/ratelimit counts)
   */
  readonly decisionMode?: DecisionMode;
  /** How long shutdown lets in-flight calls finish, in ms. @default 10_000 */
  readonly shutdownTimeoutMs?: number;
  readonly logger?: Logger;
  /**
   * Store deadline for envoy rules, in ms (`STORE_TIMEOUT_MS`). Past it the rule's
   * failure mode decides; without a `sluice.failure_mode` that is an UNAVAILABLE gRPC
   * error, as upstream answers a Redis failure, so envoy's failure_mode_deny applies.
   * @default 100
   */
  readonly storeTimeoutMs?: number;
  /** @default the system clock; tests pass a ManualClock */
  readonly clock?: Clock;
  /**
   * Most series (label sets) one metric family holds; beyond it updates are dropped and
   * counted in `sluice_metric_series_dropped_total`. @default 2000
   */
  readonly maxSeriesPerMetric?: number;
  /** How long an HTTP client may take to send a request's headers, in ms (then 408). @default 10_000 */
  readonly httpHeadersTimeoutMs?: number;
  /** How long an HTTP client may take to send a whole request, in ms (then 408). @default 30_000 */
  readonly httpRequestTimeoutMs?: number;
  /** How long an idle HTTP keep-alive connection stays open, in ms. @default 5_000 */
  readonly httpKeepAliveTimeoutMs?: number;
  /**
   * Share of decisions logged, 0 to 1 (`SLUICE_LOG_SAMPLE_RATE`).
   * @default 0.001
   */
  readonly decisionLogSampleRate?: number;
  /**
   * The hot keys the status page shows (hashed, busiest first).
   * @default the limiter metrics' top-k of bucket keys (`metrics.limiter.hotKeys()`), on
   * any store
   */
  readonly hotKeys?: { readonly source: string; readonly top: HotKeySource };
  /**
   * Take the envoy rules from this xDS management server (`CONFIG_TYPE=GRPC_XDS_SOTW`)
   * instead of files; `envoyConfig` and the runtime directory are then not read.
   * Start-up waits for the first good config unless `forceStart`
   * (`FORCE_START_WITHOUT_INITIAL_CONFIG`).
   */
  readonly xds?: XdsOptions & { readonly forceStart?: boolean };
  /**
   * Also send upstream's stats to statsd or DogStatsD (`USE_STATSD`, `USE_DOG_STATSD`);
   * Prometheus on `/metrics` stays. `nearLimitRatio` is this service's.
   */
  readonly statsd?: Omit<StatsdOptions, 'nearLimitRatio' | 'onError'>;
  /**
   * Trace every check over OTLP (`TRACING_ENABLED`): a span per check, continuing the
   * caller's trace, with each store call as a child.
   */
  readonly tracing?: TracingOptions;
  /**
   * Serve gRPC on this unix domain socket instead of TCP (`GRPC_UDS`); `grpcHost` and
   * `grpcPort` are then not used and `RunningService.grpcPort` is 0.
   */
  readonly grpcUds?: string;
  /** Close a gRPC connection (GOAWAY) after this long, in ms (`GRPC_MAX_CONNECTION_AGE`). @default grpc-js's: never */
  readonly grpcMaxConnectionAgeMs?: number;
  /** Then cut it after this long, in ms (`GRPC_MAX_CONNECTION_AGE_GRACE`). @default grpc-js's: never */
  readonly grpcMaxConnectionAgeGraceMs?: number;
  /**
   * Report unhealthy until a config with at least one domain is loaded, and whenever the
   * last one loaded has none (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`). @default false
   */
  readonly healthyWithAtLeastOneConfigLoaded?: boolean;
  /** Open upstream's debug listener (`/`, `/rlconfig`, `/stats`) here (`DEBUG_HOST`, `DEBUG_PORT`). @default none */
  readonly debug?: { readonly host: string; readonly port: number };
  /**
   * How long a Redis call may go unanswered before the store reopens the connection, in
   * ms (`REDIS_TIMEOUT`; the store's `stuckAfterMs`). A decision's own deadline is
   * `storeTimeoutMs`. @default 2_000
   */
  readonly redisTimeoutMs?: number;
  /**
   * A second Redis for the envoy rules whose unit is `second` (`REDIS_PERSECOND`,
   * `REDIS_PERSECOND_URL`); see `RateLimitServiceOptions.perSecondStore`. @default none
   */
  readonly perSecondRedis?: RedisTarget;
  /**
   * Take the named policies' budgets from a quota lease controller (`SLUICE_LEASE_*`;
   * docs/quota-leases.md). A name that no rule or policy of the config at start goes by
   * stops the start. @default none
   */
  readonly leases?: ServeLeaseOptions & {
    /** How the policy list is named in errors. @default "leases.policies" */
    readonly policiesSetting?: string;
  };
}

export interface RunningService {
  readonly httpPort: number;
  readonly grpcPort: number;
  /** The debug listener's port, when `debug` was given. */
  readonly debugPort?: number;
  readonly service: RateLimitService;
  readonly metrics: ServiceMetrics;
  /** What `/status` shows. */
  readonly status: ServiceStatus;
  /** Re-reads every config source; an invalid change keeps the running config. */
  reload(): Promise<boolean>;
  /** Stops accepting, lets in-flight calls finish, closes the store. */
  shutdown(): Promise<void>;
}

/** How long start-up waits for Redis before opening the ports anyway, in ms. */
const REDIS_CONNECT_GRACE_MS = 1_000;

/** The composition root: the only place the real clock, store and servers are wired. */
export async function startService(options: ServeOptions): Promise<RunningService> {
  checkServeOptionValues(options);
  const log = options.logger ?? pino({ name: 'sluice' });
  const limits = descriptorLimits(options);
  let redis: RedisStore | undefined;
  const metrics = new ServiceMetrics({
    storeConnected: () => redis?.connected ?? true,
    ...(options.nearLimitRatio === undefined ? {} : { nearLimitRatio: options.nearLimitRatio }),
    ...(options.maxSeriesPerMetric === undefined
      ? {}
      : { maxSeriesPerMetric: options.maxSeriesPerMetric }),
  });
  const xdsOptions = options.xds;
  const fromXds = xdsOptions !== undefined;
  const config = await loadServiceConfig({ ...options, envoyFromXds: fromXds });
  const leaseOptions = options.leases;
  // With xDS the envoy rules arrive after the start: names are checked against files only.
  if (leaseOptions !== undefined && !fromXds) checkLeasedPolicies(leaseOptions, config);
  const stats =
    options.statsd === undefined
      ? undefined
      : new StatsdStats({
          ...options.statsd,
          ...(options.nearLimitRatio === undefined
            ? {}
            : { nearLimitRatio: options.nearLimitRatio }),
          onError: (error) => log.warn({ err: error }, 'statsd: stats not sent'),
        });
  const recordConfigLoad = (result: 'success' | 'error'): void => {
    metrics.recordConfigLoad(result);
    stats?.configLoad(result);
  };
  if (!fromXds) recordConfigLoad('success');
  logConfigLoaded(log, config, 'config loaded');
  // With xDS the envoy rules are the last config the management server sent and the
  // service accepted; files give only the policies.
  let current = config;
  const prefix = options.keyPrefix ?? 'sl';
  const cluster = options.redisCluster;
  const stuck =
    options.redisTimeoutMs === undefined ? {} : { stuckAfterMs: options.redisTimeoutMs };
  // Certificate files are read now (a problem stops the start, naming its setting) and
  // re-read when they change; a change that does not load keeps the previous ones.
  const reloaded =
    (what: string) =>
    (error: Error | undefined): void => {
      if (error === undefined) log.info(`${what} certificates reloaded`);
      else
        log.error(
          { err: error },
          `${what} certificates changed but do not load; keeping the previous ones`,
        );
    };
  const redisTls =
    options.redisTls === undefined
      ? undefined
      : watchedRedisTls(options.redisTls, reloaded('Redis TLS'));
  const grpcCredentials =
    options.grpcTls === undefined
      ? undefined
      : new ReloadingServerCredentials(options.grpcTls, reloaded('gRPC server TLS'));
  const tls = redisTls === undefined ? {} : { tls: redisTls.tls };
  const store: Store =
    options.redisSentinel !== undefined
      ? RedisStore.connectSentinel(
          { ...options.redisSentinel, ...tls },
          { prefix, observer: metrics.redis, ...stuck },
        )
      : cluster !== undefined
        ? RedisStore.connectCluster(cluster.nodes, {
            prefix,
            observer: metrics.redis,
            ...stuck,
            ...(cluster.username === undefined ? {} : { username: cluster.username }),
            ...(cluster.password === undefined ? {} : { password: cluster.password }),
            ...tls,
          })
        : options.redisUrl === undefined
          ? new MemoryStore()
          : RedisStore.connect(options.redisUrl, {
              prefix,
              observer: metrics.redis,
              ...stuck,
              ...tls,
            });
  const perSecondTarget = options.perSecondRedis;
  const perSecondStore: Store | undefined =
    perSecondTarget === undefined
      ? undefined
      : perSecondTarget.type === 'single'
        ? RedisStore.connect(perSecondTarget.url, { prefix, observer: metrics.redis, ...stuck })
        : perSecondTarget.type === 'sentinel'
          ? RedisStore.connectSentinel(perSecondTarget, {
              prefix,
              observer: metrics.redis,
              ...stuck,
            })
          : RedisStore.connectCluster(perSecondTarget.nodes, {
              prefix,
              observer: metrics.redis,
              ...stuck,
              ...(perSecondTarget.username === undefined
                ? {}
                : { username: perSecondTarget.username }),
              ...(perSecondTarget.password === undefined
                ? {}
                : { password: perSecondTarget.password }),
            });
  if (store instanceof RedisStore) {
    redis = store;
    metrics.redis.watchScripts(store);
  }
  const traced = (s: Store): Store =>
    tracing === undefined
      ? s
      : new TracedStore(
          s,
          tracing,
          s instanceof RedisStore ? 'Redis Pipeline Execution' : 'Memory Store Execution',
        );
  const storeHealth = new StoreHealth({
    log,
    ...(store instanceof RedisStore ? { connected: () => store.connected } : {}),
  });
  const storeKind =
    cluster !== undefined ? 'redis-cluster' : store instanceof RedisStore ? 'redis' : 'memory';
  // The limiter counts every bucket it is asked for, whatever answers it (store or stage).
  const hotKeys = options.hotKeys ?? {
    source:
      "this process's limiter: the top-k buckets by units asked since start, by identity (counts are upper bounds)",
    top: () => metrics.limiter.hotIdentities(),
  };
  const status = new ServiceStatus({
    // A store call does not say which shard failed: the store is one row.
    store: () => ({
      kind: storeKind,
      shards: [storeHealth.status(cluster !== undefined ? 'all primaries' : storeKind)],
    }),
    hotKeys,
  });
  status.configLoaded(filesOf(config), config.envoy, config.policies);
  const leaseAgents =
    leaseOptions === undefined
      ? undefined
      : new LeaseAgents(leaseOptions, options.clock ?? systemClock, log);
  if (leaseAgents !== undefined) {
    status.leasesFrom((wallMs) => leaseAgents.status(wallMs));
    metrics.leasesFrom(() => leaseAgents.gauges());
  }
  const decisionLog = new DecisionLog({
    log,
    ...(options.decisionLogSampleRate === undefined
      ? {}
      : { sampleRate: options.decisionLogSampleRate }),
  });
  const decisionObserver = (event: DecisionEvent): void => {
    status.observe(event);
    decisionLog.record(event);
  };
  const tracing = options.tracing === undefined ? undefined : new ServiceTracing(options.tracing);
  const service = new RateLimitService({
    storeObserver: storeHealth,
    decisionObserver,
    store: traced(store),
    ...(perSecondStore === undefined ? {} : { perSecondStore: traced(perSecondStore) }),
    envoyConfig: config.envoy,
    ...(config.policies === undefined ? {} : { policies: config.policies }),
    metrics,
    ...(stats === undefined ? {} : { stats }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    globalShadowMode: options.shadowMode ?? false,
    globalQuotaMode: options.quotaMode ?? false,
    ...(options.responseHeaders === undefined ? {} : { responseHeaders: options.responseHeaders }),
    responseDynamicMetadata: options.responseDynamicMetadata ?? false,
    ...(options.decisionMode === undefined ? {} : { decisionMode: options.decisionMode }),
    defaultFailureMode: 'closed',
    timeoutMs: options.storeTimeoutMs ?? 100,
    descriptorLimits: limits,
    localCacheSizeBytes: options.localCacheSizeBytes ?? 0,
    ...(leaseAgents === undefined
      ? {}
      : {
          leases: {
            policies: leaseAgents.policies,
            agentFor: (policy: string) => leaseAgents.agentFor(policy),
          },
        }),
  });
  const handlers = {
    shouldRateLimit: async (
      r: Parameters<RateLimitService['shouldRateLimit']>[0],
      context: CallContext,
    ) => {
      const run = () => service.shouldRateLimit(r, context);
      try {
        return await (tracing === undefined
          ? run()
          : tracing.check('ShouldRateLimit Execution', { domain: r.domain }, context.header, run));
      } catch (error) {
        stats?.callError(error instanceof StoreError ? 'store' : 'service');
        throw error;
      }
    },
    check: (r: Parameters<RateLimitService['check']>[0], context: CallContext) =>
      tracing === undefined
        ? service.check(r, context)
        : tracing.check('Check Execution', {}, context.header, () => service.check(r, context)),
    rlconfig: () => service.rlconfig(),
  };
  const onError = (error: unknown): void => log.error({ err: error }, 'request failed');
  const timeout = options.shutdownTimeoutMs ?? 10_000;
  // The HTTP server times its own calls; gRPC calls are timed here.
  const timed =
    <A, R>(method: 'ShouldRateLimit' | 'Check', fn: (a: A, context: CallContext) => Promise<R>) =>
    async (a: A, context: CallContext): Promise<R> => {
      const t0 = performance.now();
      try {
        return await fn(a, context);
      } finally {
        const ms = performance.now() - t0;
        metrics.observeDecisionDuration('grpc', method, ms);
        stats?.serverCall(method, ms);
      }
    };
  const grpc = createGrpcServer(
    {
      shouldRateLimit: timed('ShouldRateLimit', handlers.shouldRateLimit),
      check: timed('Check', handlers.check),
    },
    {
      onError,
      shutdownTimeoutMs: timeout,
      descriptorLimits: limits,
      ...(grpcCredentials === undefined ? {} : { credentials: grpcCredentials }),
      serverOptions: {
        ...(options.grpcMaxConnectionAgeMs === undefined
          ? {}
          : { 'grpc.max_connection_age_ms': options.grpcMaxConnectionAgeMs }),
        ...(options.grpcMaxConnectionAgeGraceMs === undefined
          ? {}
          : { 'grpc.max_connection_age_grace_ms': options.grpcMaxConnectionAgeGraceMs }),
      },
    },
  );
  const http = new HttpServer(handlers, {
    metrics,
    status: () => status.snapshot(),
    onError,
    descriptorLimits: limits,
    ...(options.httpHeadersTimeoutMs === undefined
      ? {}
      : { headersTimeoutMs: options.httpHeadersTimeoutMs }),
    ...(options.httpRequestTimeoutMs === undefined
      ? {}
      : { requestTimeoutMs: options.httpRequestTimeoutMs }),
    ...(options.httpKeepAliveTimeoutMs === undefined
      ? {}
      : { keepAliveTimeoutMs: options.httpKeepAliveTimeoutMs }),
  });
  const hasDomains = (c: LoadedConfig): boolean => Object.keys(c.envoy.domains).length > 0;
  const health = new ServiceHealth(
    (healthy) => {
      http.setHealthy(healthy);
      grpc.setHealthy(healthy);
    },
    {
      store: true,
      ...(options.healthyWithAtLeastOneConfigLoaded === true
        ? { config: !fromXds && hasDomains(config) }
        : {}),
    },
  );
  // The ports open whether Redis is there or not: until it is, health says NOT_SERVING
  // (gRPC) and 500 (`/healthcheck`), and calls take their rule's failure mode.
  let refusedAtStart: ((error: Error) => void) | undefined;
  const refused = new Promise<Error>((resolve) => (refusedAtStart = resolve));
  const redisWait =
    store instanceof RedisStore
      ? waitForRedis(store, {
          log,
          onRefused: (error) => refusedAtStart?.(error),
          onReady: () => health.set('store', true),
        })
      : undefined;
  if (redisWait !== undefined) {
    let timer: NodeJS.Timeout | undefined;
    const refusal = await Promise.race([
      redisWait.ready.then(() => undefined),
      refused,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), REDIS_CONNECT_GRACE_MS);
      }),
    ]);
    clearTimeout(timer);
    refusedAtStart = undefined;
    if (refusal !== undefined) {
      // A replica at start is a mistake in the settings, not an outage: refuse to start.
      redisWait.stop();
      await store.close();
      await perSecondStore?.close();
      await leaseAgents?.close();
      redisTls?.close();
      grpcCredentials?.close();
      throw refusal;
    }
    if (redisWait.waiting) health.set('store', false);
  }
  let xds: XdsConfigClient | undefined;
  if (xdsOptions !== undefined) {
    xds = new XdsConfigClient({
      ...xdsOptions,
      mergeDomainConfig: options.mergeDomainConfig ?? false,
      log,
      onConfig: (envoy, version) => {
        current = { ...current, envoy };
        service.reload(envoy, current.policies);
        recordConfigLoad('success');
        health.set('config', hasDomains(current));
        status.configLoaded(filesOf(current), envoy, current.policies);
        log.info({ version, domains: Object.keys(envoy.domains) }, 'xDS config accepted');
        warnIfEmpty(current, log);
      },
      onRejected: (error, version) => {
        recordConfigLoad('error');
        log.error(
          { version, issues: error.message.split('\n') },
          'xDS config rejected; the previous config keeps serving',
        );
      },
    });
    xds.start();
    if (xdsOptions.forceStart !== true) {
      log.info('waiting for the first rate limit config from the xDS server');
      await xds.firstConfig;
    }
  }
  const grpcPort =
    options.grpcUds === undefined
      ? await grpc.listen(options.grpcHost ?? '0.0.0.0', options.grpcPort ?? 8081)
      : (await grpc.listenUnix(options.grpcUds), 0);
  const httpPort = await http.listen(options.host ?? '0.0.0.0', options.port ?? 8080);
  const debug =
    options.debug === undefined
      ? undefined
      : new DebugServer({
          '/rlconfig': {
            help: 'print out the currently loaded configuration for debugging',
            body: () => ({ contentType: 'text/plain; charset=utf-8', body: service.rlconfig() }),
          },
          '/stats': {
            help: 'print out stats (the Prometheus exposition)',
            body: () => metrics.metrics(),
          },
        });
  const debugPort =
    debug === undefined || options.debug === undefined
      ? undefined
      : await debug.listen(options.debug.host, options.debug.port);
  // Once the ports are open (nothing is left running if they cannot be): a controller that
  // is up answers the first report with a lease at once; until then the fallback applies.
  leaseAgents?.start();
  log.info(
    {
      httpPort,
      grpcPort,
      store: store.constructor.name,
      domains: Object.keys(config.envoy.domains),
    },
    'sluice serving',
  );
  if (!fromXds) warnIfEmpty(config, log);

  // One load at a time: a reload never overlaps another, whoever asked for it.
  let loading: Promise<LoadedConfig | undefined> = Promise.resolve(undefined);
  const load = (): Promise<LoadedConfig | undefined> => {
    loading = loading.then(async () => {
      try {
        const loaded = await loadServiceConfig({ ...options, envoyFromXds: fromXds });
        const next = fromXds ? { ...loaded, envoy: current.envoy } : loaded;
        current = next;
        service.reload(next.envoy, next.policies);
        recordConfigLoad('success');
        health.set('config', hasDomains(next));
        status.configLoaded(filesOf(next), next.envoy, next.policies);
        logConfigLoaded(log, next, 'config reloaded');
        warnIfEmpty(next, log);
        // The reload is served; a leased name it no longer fits is said, not refused.
        const leaseProblems =
          leaseOptions === undefined || fromXds
            ? []
            : leasedPolicyProblems(leaseOptions.policies, next.envoy, next.policies);
        if (leaseProblems.length > 0)
          log.warn({ problems: leaseProblems }, 'leased policies after the reload');
        return next;
      } catch (error) {
        recordConfigLoad('error');
        const detail =
          error instanceof PolicyError ? error.issues.map(formatIssue) : [String(error)];
        status.configRejected(detail.join('; '));
        log.error(
          {
            result: 'failed',
            files: [options.envoyConfig, options.policiesFile].filter((f) => f !== undefined),
            message: detail.join('; '),
            issues: detail,
          },
          'config reload rejected; the previous config keeps serving',
        );
        return undefined;
      }
    });
    return loading;
  };
  const reload = async (): Promise<boolean> => (await load()) !== undefined;
  const watcher = new ConfigWatcher(config.watch, async () => (await load())?.watch, {
    onWatchError: (error, dir) =>
      log.warn({ err: error, dir }, 'cannot watch a config directory; its changes need a reload'),
  });
  await watcher.start();

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> =>
    (stopping ??= (async () => {
      watcher.close();
      xds?.close();
      redisWait?.stop();
      http.setHealthy(false);
      await Promise.all([grpc.shutdown(), http.shutdown(timeout), debug?.close()]);
      // Unspent batch units go back to the store before it closes; the lease agents send
      // their last usage and leave the controller.
      await service.close();
      await leaseAgents?.close();
      await store.close();
      await perSecondStore?.close();
      await stats?.close();
      await tracing?.shutdown();
      redisTls?.close();
      grpcCredentials?.close();
      log.info('sluice stopped');
    })());
  return {
    httpPort,
    grpcPort,
    ...(debugPort === undefined ? {} : { debugPort }),
    service,
    metrics,
    status,
    reload,
    shutdown,
  };
}
/**
 * Refuses leased names that no rule or policy of `config` goes by, or whose rule has a
 * bucket per value (`leasedPolicyProblems`), naming the setting, so that a typo is not a
 * policy silently left to the store.
 */
function checkLeasedPolicies(
  leases: NonNullable<ServeOptions['leases']>,
  config: LoadedConfig,
): void {
  const problems = leasedPolicyProblems(leases.policies, config.envoy, config.policies);
  if (problems.length === 0) return;
  const path = leases.policiesSetting ?? 'leases.policies';
  const issues = problems.map((message) => ({ path, message }));
  throw new PolicyError('SLUICE_ERR_CONFIG_INVALID', issues.map(formatIssue).join('\n'), {
    issues,
  });
}

/** The files a load read (directories are listed by the files in them). */
function filesOf(config: LoadedConfig): string[] {
  return config.watch.filter((w) => !w.entries).map((w) => w.path);
}

/** The one line of a successful load: its files and the policies and rules now in force. */
function logConfigLoaded(log: Logger, config: LoadedConfig, message: string): void {
  log.info(
    {
      result: 'ok',
      files: filesOf(config),
      policies: policiesInForce(config.envoy, config.policies).map((p) => p.name),
      domains: Object.keys(config.envoy.domains),
    },
    message,
  );
}

/**
 * Says so when no rule is loaded: every request is then allowed. Upstream starts the
 * same way with its file loader (it waits for a first config only from an xDS server,
 * without FORCE_START_WITHOUT_INITIAL_CONFIG) and logs a warning; so does Sluice, naming
 * why nothing was read.
 */
function warnIfEmpty(config: LoadedConfig, log: Logger): void {
  if (Object.keys(config.envoy.domains).length > 0 || config.policies !== undefined) return;
  log.warn(
    { reasons: config.envoy.warnings.map(formatIssue) },
    'no rate limit config loaded: every request is allowed',
  );
}
