import { optionalSetting, setting } from './setting.js';
import { anyText, goBool, hostAddress, portNumber, wholeNumber } from '../../config/env-values.js';
import { DEFAULT_DESCRIPTOR_LIMITS } from '../../core/descriptor-limits.js';
import { MAX_STORE_TIMEOUT_MS } from '../store-timeout-limit.js';
import { descriptorLimit, httpTimeout, timerDuration } from './values.js';

/** The service's listeners: ports, addresses, request limits and timeouts, gRPC TLS, the debug listener. */
export const SERVER_SETTINGS = {
  port: setting({
    env: 'PORT',
    value: portNumber,
    default: 8080,
    target: 'port',
    checksOption: true,
    flags: [
      {
        spec: '--port <n>',
        help: 'HTTP port, 0-65535, 0 for any free one',
      },
    ],
    allowed: 'a whole number 0-65535 (0: any free port)',
    shownDefault: '8080',
  }),
  grpcPort: setting({
    env: 'GRPC_PORT',
    value: portNumber,
    default: 8081,
    target: 'grpcPort',
    checksOption: true,
    flags: [
      {
        spec: '--grpc-port <n>',
        help: 'gRPC port, 0-65535',
      },
    ],
    allowed: 'a whole number 0-65535',
    shownDefault: '8081',
  }),
  host: setting({
    env: 'HOST',
    value: hostAddress,
    default: '0.0.0.0',
    target: 'host',
    checksOption: true,
    flags: [
      {
        spec: '--host <addr>',
        help: 'HTTP bind address',
      },
    ],
    allowed: 'an IP address or a host name',
    shownDefault: '`0.0.0.0`',
  }),
  grpcHost: setting({
    env: 'GRPC_HOST',
    value: hostAddress,
    default: '0.0.0.0',
    target: 'grpcHost',
    checksOption: true,
    flags: [
      {
        spec: '--grpc-host <addr>',
        help: 'gRPC bind address',
      },
    ],
    allowed: 'an IP address or a host name',
    shownDefault: '`0.0.0.0`',
  }),
  storeTimeoutMs: setting({
    env: 'STORE_TIMEOUT_MS',
    value: wholeNumber(1, MAX_STORE_TIMEOUT_MS, ' of milliseconds'),
    default: 100,
    target: 'storeTimeoutMs',
    checksOption: true,
    flags: [
      {
        spec: '--store-timeout <ms>',
        help: `store deadline for envoy rules, 1-${MAX_STORE_TIMEOUT_MS} ms`,
      },
    ],
    allowed: 'a whole number of milliseconds, 1-60000: the store deadline for envoy rules',
    shownDefault: '100',
    upstream: false,
  }),
  maxDescriptors: setting({
    env: 'SLUICE_MAX_DESCRIPTORS',
    value: descriptorLimit,
    default: DEFAULT_DESCRIPTOR_LIMITS.maxDescriptors,
    target: 'maxDescriptors',
    checksOption: true,
    flags: [
      {
        spec: '--max-descriptors <n>',
        help: 'most descriptors in one request',
      },
    ],
    allowed: 'a whole number 1-1000000: most descriptors in one request (gRPC and HTTP)',
    shownDefault: '64',
    upstream: false,
  }),
  maxDescriptorEntries: setting({
    env: 'SLUICE_MAX_DESCRIPTOR_ENTRIES',
    value: descriptorLimit,
    default: DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorEntries,
    target: 'maxDescriptorEntries',
    checksOption: true,
    flags: [
      {
        spec: '--max-descriptor-entries <n>',
        help: 'most entries in one descriptor',
      },
    ],
    allowed: 'a whole number 1-1000000: most entries in one descriptor',
    shownDefault: '32',
    upstream: false,
  }),
  maxDescriptorKeyLength: setting({
    env: 'SLUICE_MAX_DESCRIPTOR_KEY_LENGTH',
    value: descriptorLimit,
    default: DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorKeyLength,
    target: 'maxDescriptorKeyLength',
    checksOption: true,
    flags: [
      {
        spec: '--max-descriptor-key-length <n>',
        help: 'longest entry key',
      },
    ],
    allowed: 'a whole number 1-1000000: longest entry key, in UTF-16 code units',
    shownDefault: '256',
    upstream: false,
  }),
  maxDescriptorValueLength: setting({
    env: 'SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH',
    value: descriptorLimit,
    default: DEFAULT_DESCRIPTOR_LIMITS.maxDescriptorValueLength,
    target: 'maxDescriptorValueLength',
    checksOption: true,
    flags: [
      {
        spec: '--max-descriptor-value-length <n>',
        help: 'longest entry value',
      },
    ],
    allowed: 'a whole number 1-1000000: longest entry value, in UTF-16 code units',
    shownDefault: '1024',
    upstream: false,
  }),
  httpHeadersTimeoutMs: optionalSetting({
    env: 'SLUICE_HTTP_HEADERS_TIMEOUT_MS',
    value: httpTimeout,
    target: 'httpHeadersTimeoutMs',
    checksOption: true,
    flags: [
      {
        spec: '--http-headers-timeout <ms>',
        help: 'time a client has to send its request headers, then 408',
      },
    ],
    allowed:
      'a whole number of milliseconds, 1-3600000: time an HTTP client has to send its request headers (then 408); at most the request timeout',
    shownDefault: '10000',
    upstream: false,
  }),
  httpRequestTimeoutMs: optionalSetting({
    env: 'SLUICE_HTTP_REQUEST_TIMEOUT_MS',
    value: httpTimeout,
    target: 'httpRequestTimeoutMs',
    checksOption: true,
    flags: [
      {
        spec: '--http-request-timeout <ms>',
        help: 'time a client has to send a whole request, then 408',
      },
    ],
    allowed:
      'a whole number of milliseconds, 1-3600000: time an HTTP client has to send a whole request (then 408)',
    shownDefault: '30000, or the headers timeout when longer',
    upstream: false,
  }),
  httpKeepAliveTimeoutMs: optionalSetting({
    env: 'SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS',
    value: httpTimeout,
    target: 'httpKeepAliveTimeoutMs',
    checksOption: true,
    flags: [
      {
        spec: '--http-keep-alive-timeout <ms>',
        help: 'how long an idle keep-alive connection stays open',
      },
    ],
    allowed:
      'a whole number of milliseconds, 1-3600000: how long an idle keep-alive connection stays open',
    shownDefault: '5000',
    upstream: false,
  }),
  grpcServerUseTls: setting({
    env: 'GRPC_SERVER_USE_TLS',
    value: goBool,
    default: false,
    opens: 'grpcTls',
    allowed: 'a boolean: the gRPC server speaks TLS',
    shownDefault: 'false',
  }),
  grpcServerTlsCert: setting({
    env: 'GRPC_SERVER_TLS_CERT',
    value: anyText,
    default: '',
    target: 'grpcTls.certFile',
    allowed: "with TLS: the server's PEM certificate chain (required)",
    shownDefault: 'empty',
  }),
  grpcServerTlsKey: setting({
    env: 'GRPC_SERVER_TLS_KEY',
    value: anyText,
    default: '',
    target: 'grpcTls.keyFile',
    allowed: 'with TLS: its PEM private key (required)',
    shownDefault: 'empty',
  }),
  grpcClientTlsCaCert: setting({
    env: 'GRPC_CLIENT_TLS_CACERT',
    value: anyText,
    default: '',
    target: 'grpcTls.clientCaFile',
    omitEmpty: true,
    allowed:
      'with TLS: a PEM file of CAs; set, clients must present a certificate from one (mutual TLS)',
    shownDefault: 'empty',
  }),
  grpcClientTlsSan: setting({
    env: 'GRPC_CLIENT_TLS_SAN',
    value: anyText,
    default: '',
    target: 'grpcTls.clientSan',
    omitEmpty: true,
    allowed:
      'with mutual TLS: a DNS name the client certificate must carry, else `UNAUTHENTICATED`',
    shownDefault: 'empty',
  }),
  grpcUds: setting({
    env: 'GRPC_UDS',
    value: anyText,
    default: '',
    target: 'grpcUds',
    omitEmpty: true,
    allowed:
      'a path: serve gRPC on this unix socket (which must not exist yet) instead of `GRPC_HOST`:`GRPC_PORT`',
    shownDefault: 'empty: TCP',
  }),
  grpcMaxConnectionAgeMs: setting({
    env: 'GRPC_MAX_CONNECTION_AGE',
    value: timerDuration,
    default: 24 * 3_600_000,
    target: 'grpcMaxConnectionAgeMs',
    allowed: 'a Go duration, at most `596h`: a gRPC connection is sent GOAWAY after this long',
    shownDefault: '`24h`',
  }),
  grpcMaxConnectionAgeGraceMs: setting({
    env: 'GRPC_MAX_CONNECTION_AGE_GRACE',
    value: timerDuration,
    default: 3_600_000,
    target: 'grpcMaxConnectionAgeGraceMs',
    allowed: 'a Go duration, at most `596h`: then closed after this long',
    shownDefault: '`1h`',
  }),
  debugHost: setting({
    env: 'DEBUG_HOST',
    value: hostAddress,
    default: '0.0.0.0',
    target: 'debug.host',
    allowed: 'an IP address or a host name',
    shownDefault: '`0.0.0.0`',
  }),
  debugPort: optionalSetting({
    env: 'DEBUG_PORT',
    value: portNumber,
    target: 'debug.port',
    opens: 'debug',
    on: (v) => v !== undefined,
    allowed: 'a whole number 0-65535: open the debug listener (`/`, `/rlconfig`, `/stats`)',
    shownDefault: 'unset: none',
  }),
  healthyWithAtLeastOneConfigLoaded: setting({
    env: 'HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED',
    value: goBool,
    default: false,
    target: 'healthyWithAtLeastOneConfigLoaded',
    allowed:
      'a boolean: unhealthy until a config with a domain is loaded, and while the last one has none',
    shownDefault: 'false',
  }),
} as const;
