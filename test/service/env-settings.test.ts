import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/core/errors.js';
import {
  readServiceSettings,
  readSetting,
  SERVICE_SETTINGS,
} from '../../src/service/env-settings.js';

function issuesOf(run: () => unknown): [string, string][] {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    expect((e as PolicyError).code).toBe('SLUICE_ERR_CONFIG_INVALID');
    return (e as PolicyError).issues.map((i) => [i.path, i.message]);
  }
  throw new Error('expected a PolicyError');
}

describe('readServiceSettings: one validation for environment variables and flags', () => {
  it("has upstream's defaults (but prefix sl, info logs and the memory store) when nothing is set", () => {
    expect(readServiceSettings({})).toEqual({
      port: 8080,
      grpcPort: 8081,
      host: '0.0.0.0',
      grpcHost: '0.0.0.0',
      storeTimeoutMs: 100,
      maxDescriptors: 64,
      maxDescriptorEntries: 32,
      maxDescriptorKeyLength: 256,
      maxDescriptorValueLength: 1024,
      keyPrefix: 'sl',
      shadowMode: false,
      quotaMode: false,
      mergeDomainConfig: false,
      nearLimitRatio: 0.8,
      localCacheSizeBytes: 0,
      responseDynamicMetadata: false,
      logLevel: 'info',
      logFormatText: false,
      decisionLogSampleRate: 0.001,
      decisionMode: 'per-descriptor',
      healthyWithAtLeastOneConfigLoaded: false,
      grpcMaxConnectionAgeMs: 86_400_000,
      grpcMaxConnectionAgeGraceMs: 3_600_000,
    });
  });

  it('reads every setting; a flag wins over its variable', () => {
    expect(
      readServiceSettings(
        {
          PORT: '9000',
          GRPC_PORT: '9001',
          HOST: '127.0.0.1',
          GRPC_HOST: '::1',
          REDIS_URL: 'cache.internal:6380',
          REDIS_AUTH: 's3cret',
          REDIS_TYPE: 'SINGLE',
          STORE_TIMEOUT_MS: '250',
          CACHE_KEY_PREFIX: 'rl',
          SHADOW_MODE: 'true',
          QUOTA_MODE: '1',
          MERGE_DOMAIN_CONFIG: 'T',
          NEAR_LIMIT_RATIO: '0.5',
          LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
          LIMIT_RESPONSE_HEADERS_ENABLED: 'True',
          LIMIT_REMAINING_HEADER: 'X-RateLimit-Remaining',
          RESPONSE_DYNAMIC_METADATA: 'TRUE',
          LOG_LEVEL: 'WARNING',
          LOG_FORMAT: 'text',
          RUNTIME_WATCH_ROOT: 'f',
          SLUICE_DECISION_MODE: 'all-or-nothing',
          SLUICE_LOG_SAMPLE_RATE: '0.25',
          SLUICE_MAX_DESCRIPTORS: '8',
          SLUICE_MAX_DESCRIPTOR_ENTRIES: '4',
          SLUICE_MAX_DESCRIPTOR_KEY_LENGTH: '16',
          SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH: '64',
          SLUICE_HTTP_HEADERS_TIMEOUT_MS: '2000',
          SLUICE_HTTP_REQUEST_TIMEOUT_MS: '9000',
          SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000',
        },
        [
          { setting: 'port', flag: '--port', value: '0' },
          { setting: 'maxDescriptors', flag: '--max-descriptors', value: '2' },
        ],
      ),
    ).toEqual({
      port: 0,
      grpcPort: 9001,
      host: '127.0.0.1',
      grpcHost: '::1',
      redis: { type: 'single', url: 'redis://:s3cret@cache.internal:6380' },
      storeTimeoutMs: 250,
      maxDescriptors: 2,
      maxDescriptorEntries: 4,
      maxDescriptorKeyLength: 16,
      maxDescriptorValueLength: 64,
      httpHeadersTimeoutMs: 2_000,
      httpRequestTimeoutMs: 9_000,
      httpKeepAliveTimeoutMs: 1_000,
      keyPrefix: 'rl',
      shadowMode: true,
      quotaMode: true,
      mergeDomainConfig: true,
      nearLimitRatio: 0.5,
      localCacheSizeBytes: 1_048_576,
      responseHeaders: {
        limit: 'RateLimit-Limit',
        remaining: 'X-RateLimit-Remaining',
        reset: 'RateLimit-Reset',
      },
      responseDynamicMetadata: true,
      logLevel: 'warn',
      logFormatText: true,
      decisionLogSampleRate: 0.25,
      decisionMode: 'all-or-nothing',
      healthyWithAtLeastOneConfigLoaded: false,
      grpcMaxConnectionAgeMs: 86_400_000,
      grpcMaxConnectionAgeGraceMs: 3_600_000,
    });
  });

  it('--redis-cluster gives a cluster whatever REDIS_TYPE says', () => {
    expect(
      readServiceSettings({ REDIS_TYPE: 'single', REDIS_AUTH: 'app:pw' }, [
        { setting: 'redisUrl', flag: '--redis-cluster', value: '127.0.0.1:7000,[::1]:7001' },
        { setting: 'redisType', flag: '--redis-cluster', value: 'cluster' },
      ]).redis,
    ).toEqual({
      type: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7000 },
        { host: '::1', port: 7001 },
      ],
      username: 'app',
      password: 'pw',
    });
  });

  it("takes exactly Go's strconv.ParseBool spellings, as upstream's envconfig does", () => {
    for (const t of ['1', 't', 'T', 'TRUE', 'true', 'True'])
      expect(readSetting('shadowMode', { SHADOW_MODE: t })).toBe(true);
    for (const f of ['0', 'f', 'F', 'FALSE', 'false', 'False'])
      expect(readSetting('shadowMode', { SHADOW_MODE: f })).toBe(false);
    // ParseBool refuses these, so upstream does not start with them either.
    for (const bad of ['', 'yes', 'no', 'on', 'off', 'tRUE', ' true', '2'])
      expect(issuesOf(() => readSetting('shadowMode', { SHADOW_MODE: bad }))).toEqual([
        [
          'SHADOW_MODE',
          `expected a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False), got ${JSON.stringify(bad)}`,
        ],
      ]);
  });

  it('numbers: whole decimal ports 0-65535, a store deadline from 1 to 60000 ms, a ratio in (0, 1]', () => {
    expect(readSetting('port', { PORT: '65535' })).toBe(65_535);
    expect(readSetting('storeTimeoutMs', { STORE_TIMEOUT_MS: '60000' })).toBe(60_000);
    expect(readSetting('nearLimitRatio', { NEAR_LIMIT_RATIO: '1' })).toBe(1);
    expect(
      issuesOf(() => readSetting('localCacheSizeBytes', { LOCAL_CACHE_SIZE_IN_BYTES: '-1' })),
    ).toEqual([
      [
        'LOCAL_CACHE_SIZE_IN_BYTES',
        'expected a whole number of bytes from 0 to 1073741824, got "-1"',
      ],
    ]);
    expect(issuesOf(() => readSetting('port', { PORT: '0x1f90' }))).toEqual([
      ['PORT', 'expected a whole number from 0 to 65535, got "0x1f90"'],
    ]);
    expect(issuesOf(() => readSetting('nearLimitRatio', { NEAR_LIMIT_RATIO: '' }))).toEqual([
      ['NEAR_LIMIT_RATIO', 'expected a number greater than 0 and at most 1, got ""'],
    ]);
  });

  it('the decision log sample rate is a share from 0 (off) to 1 (every decision)', () => {
    expect(readSetting('decisionLogSampleRate', { SLUICE_LOG_SAMPLE_RATE: '0' })).toBe(0);
    expect(readSetting('decisionLogSampleRate', { SLUICE_LOG_SAMPLE_RATE: '1' })).toBe(1);
    for (const bad of ['1.5', '-0.1', 'all', ''])
      expect(
        issuesOf(() => readSetting('decisionLogSampleRate', { SLUICE_LOG_SAMPLE_RATE: bad })),
      ).toEqual([
        ['SLUICE_LOG_SAMPLE_RATE', `expected a number from 0 to 1, got ${JSON.stringify(bad)}`],
      ]);
  });

  it('descriptor limits are whole numbers 1-1000000; HTTP timeouts 1-3600000 ms, headers within request', () => {
    expect(
      readSetting('maxDescriptorValueLength', { SLUICE_MAX_DESCRIPTOR_VALUE_LENGTH: '1000000' }),
    ).toBe(1_000_000);
    expect(
      issuesOf(() =>
        readServiceSettings({
          SLUICE_MAX_DESCRIPTORS: '0',
          SLUICE_MAX_DESCRIPTOR_KEY_LENGTH: '1e3',
          SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS: '3600001',
        }),
      ),
    ).toEqual([
      ['SLUICE_MAX_DESCRIPTORS', 'expected a whole number from 1 to 1000000, got "0"'],
      ['SLUICE_MAX_DESCRIPTOR_KEY_LENGTH', 'expected a whole number from 1 to 1000000, got "1e3"'],
      [
        'SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS',
        'expected a whole number of milliseconds from 1 to 3600000, got "3600001"',
      ],
    ]);
    expect(
      issuesOf(() =>
        readServiceSettings({ SLUICE_HTTP_HEADERS_TIMEOUT_MS: '6000' }, [
          { setting: 'httpRequestTimeoutMs', flag: '--http-request-timeout', value: '5000' },
        ]),
      ),
    ).toEqual([
      [
        'SLUICE_HTTP_HEADERS_TIMEOUT_MS',
        'must not exceed --http-request-timeout (5000), got "6000"',
      ],
    ]);
  });

  it('header names are checked even while the headers are off, and used only when on', () => {
    expect(readServiceSettings({ LIMIT_LIMIT_HEADER: 'X-L' })).not.toHaveProperty(
      'responseHeaders',
    );
    expect(issuesOf(() => readServiceSettings({ LIMIT_LIMIT_HEADER: 'X L' }))).toEqual([
      [
        'LIMIT_LIMIT_HEADER',
        'expected an HTTP header name (letters, digits and !#$%&\'*+-.^_`|~), got "X L"',
      ],
    ]);
  });

  it('reports every problem at once, naming the flag when the value came from one', () => {
    expect(
      issuesOf(() =>
        readServiceSettings({ PORT: 'abc', GRPC_PORT: 'also bad', LOG_FORMAT: 'xml' }, [
          { setting: 'grpcPort', flag: '--grpc-port', value: '-1' },
          { setting: 'redisUrl', flag: '--redis', value: 'no-port' },
        ]),
      ),
    ).toEqual([
      ['PORT', 'expected a whole number from 0 to 65535, got "abc"'],
      ['--grpc-port', 'expected a whole number from 0 to 65535, got "-1"'],
      ['LOG_FORMAT', 'expected one of json, text, got "xml"'],
      [
        '--redis',
        'expected host:port or a redis:// or rediss:// URL with a host and a port, got "no-port"',
      ],
    ]);
  });

  it('the schema has one entry per variable, each variable once', () => {
    const names = Object.values(SERVICE_SETTINGS).map((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
  });

  it('quota leases: controllers with policies make the service an agent; every other lease setting needs them', () => {
    expect(readServiceSettings({}).leases).toBeUndefined();
    expect(
      readServiceSettings(
        {
          SLUICE_LEASE_CONTROLLERS: '127.0.0.1:18081, [::1]:18082',
          SLUICE_LEASE_POLICIES: 'global-api,global-api,search',
          SLUICE_LEASE_FALLBACK: '25.5',
        },
        [{ setting: 'leaseRefreshMs', flag: '--lease-refresh', value: '500' }],
      ).leases,
    ).toEqual({
      controllers: ['127.0.0.1:18081', '[::1]:18082'],
      policies: ['global-api', 'search'],
      policiesSetting: 'SLUICE_LEASE_POLICIES',
      domain: 'sluice',
      refreshMs: 500,
      fallback: { kind: 'static', rate: 25.5 },
    });
    expect(
      readServiceSettings({
        SLUICE_LEASE_CONTROLLERS: 'c:1',
        SLUICE_LEASE_POLICIES: 'p',
        SLUICE_LEASE_FALLBACK: 'STORE',
        SLUICE_LEASE_AGENT: 'eu-1',
        SLUICE_LEASE_TTL_MS: '3000',
        SLUICE_LEASE_DOMAIN: 'edge',
      }).leases,
    ).toMatchObject({ fallback: { kind: 'store' }, agent: 'eu-1', maxTtlMs: 3000, domain: 'edge' });
    expect(
      readServiceSettings({
        SLUICE_LEASE_CONTROLLERS: 'c:1',
        SLUICE_LEASE_POLICIES: 'p',
        SLUICE_LEASE_TLS: 'true',
        SLUICE_LEASE_TLS_CACERT: '/etc/ca.pem',
        SLUICE_LEASE_TLS_SAN: 'quota.internal',
      }).leases?.tlsFiles,
    ).toEqual({
      caCertFile: '/etc/ca.pem',
      clientCertFile: '',
      clientKeyFile: '',
      serverName: 'quota.internal',
    });
    expect(
      issuesOf(() =>
        readServiceSettings({
          SLUICE_LEASE_CONTROLLERS: 'c:1',
          SLUICE_LEASE_POLICIES: 'p',
          SLUICE_LEASE_TLS_CACERT: '/etc/ca.pem',
        }),
      ),
    ).toEqual([['SLUICE_LEASE_TLS_CACERT', 'applies only with SLUICE_LEASE_TLS=true']]);
    expect(
      issuesOf(() =>
        readServiceSettings({
          SLUICE_LEASE_CONTROLLERS: 'no-port,c:70000',
          SLUICE_LEASE_FALLBACK: 'allow',
          SLUICE_LEASE_DOMAIN: '',
        }),
      ),
    ).toEqual([
      [
        'SLUICE_LEASE_CONTROLLERS',
        'expected comma-separated host:port addresses (port 1-65535), got "no-port,c:70000"',
      ],
      ['SLUICE_LEASE_DOMAIN', 'expected a non-empty RLQS domain, got ""'],
      [
        'SLUICE_LEASE_FALLBACK',
        'expected deny, store, or a static rate in units per second (a number ≥ 0), got "allow"',
      ],
    ]);
    expect(
      issuesOf(() =>
        readServiceSettings({ SLUICE_LEASE_CONTROLLERS: 'c:1', SLUICE_LEASE_TTL_MS: '999' }),
      ),
    ).toEqual([
      [
        'SLUICE_LEASE_POLICIES',
        'required with SLUICE_LEASE_CONTROLLERS: the policies or rules that take leases',
      ],
      [
        'SLUICE_LEASE_TTL_MS',
        'must be at least SLUICE_LEASE_REFRESH_MS (1000): a lease must outlive the round that renews it, got "999"',
      ],
    ]);
    expect(
      issuesOf(() =>
        readServiceSettings({ SLUICE_LEASE_FALLBACK: 'deny' }, [
          { setting: 'leasePolicies', flag: '--lease-policies', value: 'p' },
        ]),
      ),
    ).toEqual([
      [
        '--lease-policies',
        'applies only with SLUICE_LEASE_CONTROLLERS (the controllers to take leases from)',
      ],
      [
        'SLUICE_LEASE_FALLBACK',
        'applies only with SLUICE_LEASE_CONTROLLERS (the controllers to take leases from)',
      ],
    ]);
  });
});
