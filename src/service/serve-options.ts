import type { Logger } from 'pino';
import type { DecisionMode } from '../config/envoy/envoy-config.js';
import type { Clock } from '../core/clock.js';
import type { DescriptorLimits } from '../core/descriptor-limits.js';
import type { StatsdOptions } from '../metrics/statsd/statsd-stats.js';
import type { GrpcTlsSettings } from './grpc/tls-credentials.js';
import type { ServeLeaseOptions } from './lease-agents.js';
import type { RedisTarget } from './redis-settings.js';
import type { RedisTlsSettings } from './redis-tls.js';
import type { ResponseHeaderNames } from './response-headers.js';
import type { ConfigSources } from './service-config.js';
import type { HotKeySource } from './status/service-status.js';
import type { TracingOptions } from './tracing/service-tracing.js';
import type { XdsOptions } from './xds/xds-config-client.js';

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
  /**
   * The Redis the buckets are kept in (`REDIS_URL`, `REDIS_TYPE`, `REDIS_AUTH`,
   * `REDIS_SENTINEL_AUTH`; `--redis`, `--redis-cluster`): one server, a Redis Cluster
   * (the store decides on primaries only) or a primary found through Redis Sentinel.
   * @default the embedded memory store
   */
  readonly redis?: RedisTarget;
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
  /** Close a gRPC connection (GOAWAY) after this long, in ms (`GRPC_MAX_CONNECTION_AGE`). @default 86_400_000 (24 h, as `GRPC_MAX_CONNECTION_AGE`) */
  readonly grpcMaxConnectionAgeMs?: number;
  /** Then cut it after this long, in ms (`GRPC_MAX_CONNECTION_AGE_GRACE`). @default 3_600_000 (1 h) */
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
  readonly redisPerSecond?: RedisTarget;
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
