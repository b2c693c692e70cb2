import type { SettingKey } from '../service/env-settings.js';
import { MAX_STORE_TIMEOUT_MS } from '../service/store-timeout-limit.js';

/** A `serve` flag that sets one service setting (docs/cli.md, "Environment variables"). */
export interface ServeFlag {
  /** The commander option, e.g. `--port <n>`. */
  readonly spec: string;
  /** The setting it sets; its text is validated with the variable's. */
  readonly setting: SettingKey;
  readonly help: string;
  /** A second setting the flag implies, with the value it gives it. */
  readonly also?: { readonly setting: SettingKey; readonly value: string };
}

/**
 * The `serve` flags that stand for settings, declared once: `serve` makes its options
 * from them and hands their values to the settings' validation, named by flag.
 */
export const SERVE_FLAGS: readonly ServeFlag[] = [
  {
    spec: '--port <n>',
    setting: 'port',
    help: 'HTTP port, 0-65535, 0 for any free one (env PORT; default 8080)',
  },
  {
    spec: '--grpc-port <n>',
    setting: 'grpcPort',
    help: 'gRPC port, 0-65535 (env GRPC_PORT; default 8081)',
  },
  {
    spec: '--host <addr>',
    setting: 'host',
    help: 'HTTP bind address (env HOST; default 0.0.0.0)',
  },
  {
    spec: '--grpc-host <addr>',
    setting: 'grpcHost',
    help: 'gRPC bind address (env GRPC_HOST; default 0.0.0.0)',
  },
  {
    spec: '--redis <url>',
    setting: 'redisUrl',
    help: 'Redis host:port or redis:// URL (env REDIS_URL; REDIS_AUTH, REDIS_TYPE, for Sentinel REDIS_SENTINEL_AUTH); default: the embedded memory store',
  },
  {
    spec: '--redis-cluster <host:port,...>',
    setting: 'redisUrl',
    help: 'Redis Cluster seed nodes, comma-separated (or env REDIS_TYPE=cluster with REDIS_URL as the list; REDIS_AUTH applies)',
    also: { setting: 'redisType', value: 'cluster' },
  },
  {
    spec: '--store-timeout <ms>',
    setting: 'storeTimeoutMs',
    help: `store deadline for envoy rules, 1-${MAX_STORE_TIMEOUT_MS} ms (env STORE_TIMEOUT_MS; default 100)`,
  },
  {
    spec: '--max-descriptors <n>',
    setting: 'maxDescriptors',
    help: 'most descriptors in one request (env SLUICE_MAX_DESCRIPTORS; default 64)',
  },
  {
    spec: '--max-descriptor-entries <n>',
    setting: 'maxDescriptorEntries',
    help: 'most entries in one descriptor (env SLUICE_MAX_DESCRIPTOR_ENTRIES; default 32)',
  },
  {
    spec: '--max-descriptor-key-length <n>',
    setting: 'maxDescriptorKeyLength',
    help: 'longest entry key (env SLUICE_MAX_DESCRIPTOR_KEY_LENGTH; default 256)',
  },
  {
    spec: '--max-descriptor-value-length <n>',
    setting: 'maxDescriptorValueLength',
    help: 'longest entry value (env SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH; default 1024)',
  },
  {
    spec: '--http-headers-timeout <ms>',
    setting: 'httpHeadersTimeoutMs',
    help: 'time a client has to send its request headers, then 408 (env SLUICE_HTTP_HEADERS_TIMEOUT_MS; default 10000)',
  },
  {
    spec: '--http-request-timeout <ms>',
    setting: 'httpRequestTimeoutMs',
    help: 'time a client has to send a whole request, then 408 (env SLUICE_HTTP_REQUEST_TIMEOUT_MS; default 30000)',
  },
  {
    spec: '--http-keep-alive-timeout <ms>',
    setting: 'httpKeepAliveTimeoutMs',
    help: 'how long an idle keep-alive connection stays open (env SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS; default 5000)',
  },
  {
    spec: '--lease-controllers <host:port,...>',
    setting: 'leaseControllers',
    help: 'take quota leases from these `sluice controller`s, tried in turn (env SLUICE_LEASE_CONTROLLERS)',
  },
  {
    spec: '--lease-policies <name,...>',
    setting: 'leasePolicies',
    help: 'the rules or policies decided by a lease, by public name (env SLUICE_LEASE_POLICIES)',
  },
  {
    spec: '--lease-domain <domain>',
    setting: 'leaseDomain',
    help: "the controller's --domain (env SLUICE_LEASE_DOMAIN; default sluice)",
  },
  {
    spec: '--lease-agent <name>',
    setting: 'leaseAgent',
    help: 'this instance among the agents (env SLUICE_LEASE_AGENT; default <hostname>-<pid>-<random>, new at each start)',
  },
  {
    spec: '--lease-token-file <file>',
    setting: 'leaseTokenFile',
    help: "a file holding this instance's bearer token for the controllers, read at each connect (env SLUICE_LEASE_TOKEN_FILE)",
  },
  {
    spec: '--lease-refresh <ms>',
    setting: 'leaseRefreshMs',
    help: "report period and lease window, the controller's --refresh-ms (env SLUICE_LEASE_REFRESH_MS; default 1000)",
  },
  {
    spec: '--lease-ttl <ms>',
    setting: 'leaseTtlMs',
    help: "the longest a lease is held (env SLUICE_LEASE_TTL_MS; default the controller's TTL)",
  },
  {
    spec: '--lease-fallback <deny|store|rate>',
    setting: 'leaseFallback',
    help: 'without a lease in force: deny, the store, or a static rate per second (env SLUICE_LEASE_FALLBACK; default deny)',
  },
];
