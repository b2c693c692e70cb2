import { pino } from 'pino';
import type { ServeOptions } from './serve-options.js';
import { descriptorLimits } from '../core/descriptor-limits.js';
import { formatIssue, PolicyError, StoreError } from '../core/errors.js';
import { ServiceMetrics } from '../metrics/service-metrics.js';
import { StatsdStats } from '../metrics/statsd/statsd-stats.js';
import { RedisStore } from '../stores/redis/redis-store.js';
import type { Store } from '../stores/store.js';
import { resolveServeOptions } from './env-settings.js';
import { createGrpcServer } from './grpc/server.js';
import { ReloadingServerCredentials } from './grpc/tls-credentials.js';
import { redisTls as watchedRedisTls } from './redis-tls.js';
import type { CallContext } from './grpc/handlers.js';
import { HttpServer } from './http/http-server.js';
import { RateLimitService } from './rate-limit-service.js';
import { openStore, scriptStatsOf, waitAtStart } from './open-store.js';
import { StoreHealth } from './store-health.js';
import { ConfigWatcher } from './config-watcher.js';
import { loadServiceConfig, type LoadedConfig } from './service-config.js';
import { DecisionLog } from './decision-log.js';
import type { DecisionEvent } from './decision-event.js';
import { ServiceStatus } from './status/service-status.js';
import { XdsConfigClient } from './xds/xds-config-client.js';
import { ServiceTracing } from './tracing/service-tracing.js';
import { TracedStore } from './tracing/traced-store.js';
import { ServiceHealth } from './service-health.js';
import { DebugServer } from './http/debug-server.js';
import { systemClock } from '../core/clock.js';
import { LeaseAgents } from './lease-agents.js';
import { leasedPolicyProblems } from './leased-policies.js';
import { checkLeasedPolicies, filesOf, logConfigLoaded, warnIfEmpty } from './config-log.js';

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
export type { ServeOptions } from './serve-options.js';

export async function startService(given: ServeOptions): Promise<RunningService> {
  const options = resolveServeOptions(given);
  const log = options.logger ?? pino({ name: 'sluice' });
  const limits = descriptorLimits(options);
  // Every Redis the service opened (main, per-second): connected means all of them.
  const redisStores: RedisStore[] = [];
  const metrics = new ServiceMetrics({
    storeConnected: () => redisStores.every((r) => r.connected),
    nearLimitRatio: options.nearLimitRatio,
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
  const prefix = options.keyPrefix;
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
  // The main and the per-second Redis are opened alike: the same prefix, observer,
  // REDIS_TIMEOUT and TLS, each waited for at start and its script stats scraped.
  const storeOptions = {
    prefix,
    observer: metrics.redis,
    ...stuck,
    ...(redisTls === undefined ? {} : { tls: redisTls.tls }),
  };
  const main = openStore(options.redis, storeOptions);
  const store = main.store;
  const perSecond =
    options.redisPerSecond === undefined
      ? undefined
      : openStore(options.redisPerSecond, storeOptions);
  const perSecondStore = perSecond?.store;
  for (const r of [main.redis, perSecond?.redis]) if (r !== undefined) redisStores.push(r);
  if (redisStores.length > 0) metrics.redis.watchScripts(scriptStatsOf(redisStores));
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
    ...(main.redis === undefined ? {} : { connected: () => main.redis!.connected }),
  });
  const storeKind = main.kind;
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
      shards: [storeHealth.status(storeKind === 'redis-cluster' ? 'all primaries' : storeKind)],
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
    sampleRate: options.decisionLogSampleRate,
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
    globalShadowMode: options.shadowMode,
    globalQuotaMode: options.quotaMode,
    ...(options.responseHeaders === undefined ? {} : { responseHeaders: options.responseHeaders }),
    responseDynamicMetadata: options.responseDynamicMetadata,
    decisionMode: options.decisionMode,
    defaultFailureMode: 'closed',
    timeoutMs: options.storeTimeoutMs,
    descriptorLimits: limits,
    localCacheSizeBytes: options.localCacheSizeBytes,
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
      ...(perSecond?.redis === undefined ? {} : { perSecondStore: true }),
      ...(options.healthyWithAtLeastOneConfigLoaded === true
        ? { config: !fromXds && hasDomains(config) }
        : {}),
    },
  );
  // The ports open whether Redis is there or not: until it is, health says NOT_SERVING
  // (gRPC) and 500 (`/healthcheck`), and calls take their rule's failure mode.
  const started = await waitAtStart(
    [
      ...(main.redis === undefined ? [] : [{ redis: main.redis, part: 'store' }]),
      ...(perSecond?.redis === undefined
        ? []
        : [{ redis: perSecond.redis, part: 'perSecondStore' }]),
    ],
    { log, graceMs: REDIS_CONNECT_GRACE_MS, setHealth: (part, ok) => health.set(part, ok) },
  );
  if (started.refusal !== undefined) {
    // A replica at start is a mistake in the settings, not an outage: refuse to start.
    await store.close();
    await perSecondStore?.close();
    await leaseAgents?.close();
    redisTls?.close();
    grpcCredentials?.close();
    throw started.refusal;
  }
  let xds: XdsConfigClient | undefined;
  if (xdsOptions !== undefined) {
    xds = new XdsConfigClient({
      ...xdsOptions,
      mergeDomainConfig: options.mergeDomainConfig,
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
      ? await grpc.listen(options.grpcHost, options.grpcPort)
      : (await grpc.listenUnix(options.grpcUds), 0);
  const httpPort = await http.listen(options.host, options.port);
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
      for (const w of started.waits) w.stop();
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
