import { pino, type Logger } from 'pino';
import type { DecisionMode } from '../config/envoy/envoy-config.js';
import type { Clock } from '../core/clock.js';
import { descriptorLimits, type DescriptorLimits } from '../core/descriptor-limits.js';
import { formatIssue, PolicyError } from '../core/errors.js';
import { ServiceMetrics } from '../metrics/service-metrics.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { RedisStore } from '../stores/redis/redis-store.js';
import type { Store } from '../stores/store.js';
import { checkServeOptionValues } from './env-settings.js';
import { createGrpcServer } from './grpc/server.js';
import type { CallContext } from './grpc/types.js';
import { HttpServer } from './http/http-server.js';
import { RateLimitService } from './rate-limit-service.js';
import { waitForRedis } from './redis-wait.js';
import { StoreHealth } from './store-health.js';
import type { ResponseHeaderNames } from './response-headers.js';
import { ConfigWatcher } from './config-watcher.js';
import { loadServiceConfig, type ConfigSources, type LoadedConfig } from './service-config.js';

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
  /** Key prefix in Redis (`CACHE_KEY_PREFIX`). @default "sl" */
  readonly keyPrefix?: string;
  /** Upstream's `SHADOW_MODE`. @default false */
  readonly shadowMode?: boolean;
  /** Upstream's `QUOTA_MODE`. @default false */
  readonly quotaMode?: boolean;
  /** Upstream's `NEAR_LIMIT_RATIO`, for the `near_limit` counters. @default 0.8 */
  readonly nearLimitRatio?: number;
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
}

export interface RunningService {
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly service: RateLimitService;
  readonly metrics: ServiceMetrics;
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
  const config = await loadServiceConfig(options);
  metrics.recordConfigLoad('success');
  const prefix = options.keyPrefix ?? 'sl';
  const cluster = options.redisCluster;
  const store: Store =
    cluster !== undefined
      ? RedisStore.connectCluster(cluster.nodes, {
          prefix,
          observer: metrics.redis,
          ...(cluster.username === undefined ? {} : { username: cluster.username }),
          ...(cluster.password === undefined ? {} : { password: cluster.password }),
        })
      : options.redisUrl === undefined
        ? new MemoryStore()
        : RedisStore.connect(options.redisUrl, { prefix, observer: metrics.redis });
  if (store instanceof RedisStore) {
    redis = store;
    metrics.redis.watchScripts(store);
  }
  const storeHealth = new StoreHealth({
    log,
    ...(store instanceof RedisStore ? { connected: () => store.connected } : {}),
  });
  const service = new RateLimitService({
    storeObserver: storeHealth,
    store,
    envoyConfig: config.envoy,
    ...(config.policies === undefined ? {} : { policies: config.policies }),
    metrics,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    globalShadowMode: options.shadowMode ?? false,
    globalQuotaMode: options.quotaMode ?? false,
    ...(options.responseHeaders === undefined ? {} : { responseHeaders: options.responseHeaders }),
    responseDynamicMetadata: options.responseDynamicMetadata ?? false,
    ...(options.decisionMode === undefined ? {} : { decisionMode: options.decisionMode }),
    defaultFailureMode: 'closed',
    timeoutMs: options.storeTimeoutMs ?? 100,
    descriptorLimits: limits,
  });
  const handlers = {
    shouldRateLimit: (
      r: Parameters<RateLimitService['shouldRateLimit']>[0],
      context: CallContext,
    ) => service.shouldRateLimit(r, context),
    check: (r: Parameters<RateLimitService['check']>[0], context: CallContext) =>
      service.check(r, context),
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
        metrics.observeDecisionDuration('grpc', method, performance.now() - t0);
      }
    };
  const grpc = createGrpcServer(
    {
      shouldRateLimit: timed('ShouldRateLimit', handlers.shouldRateLimit),
      check: timed('Check', handlers.check),
    },
    { onError, shutdownTimeoutMs: timeout, descriptorLimits: limits },
  );
  const http = new HttpServer(handlers, {
    metrics,
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
  // The ports open whether Redis is there or not: until it is, health says NOT_SERVING
  // (gRPC) and 500 (`/healthcheck`), and calls take their rule's failure mode.
  const redisWait =
    store instanceof RedisStore
      ? waitForRedis(store, {
          log,
          onReady: () => {
            http.setHealthy(true);
            grpc.setHealthy(true);
          },
        })
      : undefined;
  if (redisWait !== undefined) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      redisWait.ready,
      new Promise((resolve) => (timer = setTimeout(resolve, REDIS_CONNECT_GRACE_MS))),
    ]);
    clearTimeout(timer);
    if (redisWait.waiting) {
      http.setHealthy(false);
      grpc.setHealthy(false);
    }
  }
  const grpcPort = await grpc.listen(options.grpcHost ?? '0.0.0.0', options.grpcPort ?? 8081);
  const httpPort = await http.listen(options.host ?? '0.0.0.0', options.port ?? 8080);
  log.info(
    {
      httpPort,
      grpcPort,
      store: store.constructor.name,
      domains: Object.keys(config.envoy.domains),
    },
    'sluice serving',
  );
  warnIfEmpty(config, log);

  // One load at a time: a reload never overlaps another, whoever asked for it.
  let loading: Promise<LoadedConfig | undefined> = Promise.resolve(undefined);
  const load = (): Promise<LoadedConfig | undefined> => {
    loading = loading.then(async () => {
      try {
        const next = await loadServiceConfig(options);
        service.reload(next.envoy, next.policies);
        metrics.recordConfigLoad('success');
        log.info({ domains: Object.keys(next.envoy.domains) }, 'config reloaded');
        warnIfEmpty(next, log);
        return next;
      } catch (error) {
        metrics.recordConfigLoad('error');
        const detail =
          error instanceof PolicyError ? error.issues.map(formatIssue) : [String(error)];
        log.error({ issues: detail }, 'config reload rejected; the previous config keeps serving');
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
      redisWait?.stop();
      http.setHealthy(false);
      await Promise.all([grpc.shutdown(), http.shutdown(timeout)]);
      await store.close();
      log.info('sluice stopped');
    })());
  return { httpPort, grpcPort, service, metrics, reload, shutdown };
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
