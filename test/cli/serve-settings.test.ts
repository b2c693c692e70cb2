/**
 * `sluice serve` refuses a bad setting before it opens a port: the built CLI is spawned
 * with each bad value (an environment variable or the flag that sets the same value),
 * must exit 1 on its own, print the expected line naming the variable or flag, and log
 * nothing (the first log line is written once both ports listen). Needs `npm run build`.
 */
import { describe, expect, it } from 'vitest';
import { runSluice, SERVE_ENV, type Outcome } from './run-sluice.js';

/** `sluice serve --config examples/envoy ...args` with only `env` (over loopback, ports 0). */
const serve = (env: Record<string, string>, args: readonly string[]): Promise<Outcome> =>
  runSluice(['serve', '--config', 'examples/envoy', ...args], { env: { ...SERVE_ENV, ...env } });

const BOOL = 'expected a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False), got';
const PORT = 'expected a whole number from 0 to 65535, got';
const TIMEOUT = 'expected a whole number of milliseconds from 1 to 60000, got';
const HOST = 'expected an IP address or a host name, got';
const LIMIT = 'expected a whole number from 1 to 1000000, got';
const RATIO = 'expected a number greater than 0 and at most 1, got';
const HEADER = "expected an HTTP header name (letters, digits and !#$%&'*+-.^_`|~), got";

// [environment, flags, the line after "sluice: " and before " [SLUICE_ERR_CONFIG_INVALID]"]
const rows: [Record<string, string>, string[], string][] = [
  [{ STORE_TIMEOUT_MS: '0' }, [], `STORE_TIMEOUT_MS: ${TIMEOUT} "0"`],
  [{ STORE_TIMEOUT_MS: '-5' }, [], `STORE_TIMEOUT_MS: ${TIMEOUT} "-5"`],
  [{ STORE_TIMEOUT_MS: 'abc' }, [], `STORE_TIMEOUT_MS: ${TIMEOUT} "abc"`],
  [{ STORE_TIMEOUT_MS: '1.5' }, [], `STORE_TIMEOUT_MS: ${TIMEOUT} "1.5"`],
  [{ STORE_TIMEOUT_MS: '60001' }, [], `STORE_TIMEOUT_MS: ${TIMEOUT} "60001"`],
  [{}, ['--store-timeout', '0'], `--store-timeout: ${TIMEOUT} "0"`],
  [{ SLUICE_MAX_DESCRIPTORS: '0' }, [], `SLUICE_MAX_DESCRIPTORS: ${LIMIT} "0"`],
  [{}, ['--max-descriptor-value-length', 'abc'], `--max-descriptor-value-length: ${LIMIT} "abc"`],
  [
    { SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS: '0' },
    [],
    'SLUICE_HTTP_KEEP_ALIVE_TIMEOUT_MS: expected a whole number of milliseconds from 1 to 3600000, got "0"',
  ],
  [
    { SLUICE_HTTP_HEADERS_TIMEOUT_MS: '6000' },
    ['--http-request-timeout', '5000'],
    'SLUICE_HTTP_HEADERS_TIMEOUT_MS: must not exceed --http-request-timeout (5000), got "6000"',
  ],
  [{ PORT: 'abc' }, [], `PORT: ${PORT} "abc"`],
  [{ PORT: '65536' }, [], `PORT: ${PORT} "65536"`],
  [{ PORT: '' }, [], `PORT: ${PORT} ""`],
  [{ GRPC_PORT: '-1' }, [], `GRPC_PORT: ${PORT} "-1"`],
  [{}, ['--port', 'abc'], `--port: ${PORT} "abc"`],
  [{}, ['--grpc-port=-1'], `--grpc-port: ${PORT} "-1"`],
  [{ HOST: 'not a host' }, [], `HOST: ${HOST} "not a host"`],
  [{ GRPC_HOST: '' }, [], `GRPC_HOST: ${HOST} ""`],
  [{}, ['--host', 'under_score'], `--host: ${HOST} "under_score"`],
  [
    { REDIS_URL: '' },
    [],
    'REDIS_URL: expected host:port or a redis:// URL (unset: the embedded memory store), got ""',
  ],
  [
    { REDIS_URL: 'localhost' },
    [],
    'REDIS_URL: expected host:port or a redis:// or rediss:// URL with a host and a port, got "localhost"',
  ],
  [
    {},
    ['--redis', 'redis://'],
    '--redis: expected host:port or a redis:// or rediss:// URL with a host and a port, got "redis://"',
  ],
  [
    { REDIS_URL: '127.0.0.1:6379', REDIS_TYPE: 'sentinel' },
    [],
    'REDIS_URL: expected the master name, then the Sentinels: <master name>,<host:port>[,<host:port>...] (REDIS_TYPE=sentinel), got "127.0.0.1:6379"',
  ],
  [
    { REDIS_URL: '127.0.0.1', REDIS_TYPE: 'cluster' },
    [],
    'REDIS_URL: expected host:port of a Redis Cluster node, got "127.0.0.1"',
  ],
  [
    {},
    ['--redis-cluster', 'node-1'],
    '--redis-cluster: expected host:port of a Redis Cluster node, got "node-1"',
  ],
  [
    {},
    ['--redis', '127.0.0.1:1', '--redis-cluster', '127.0.0.1:2'],
    '--redis, --redis-cluster: give only one of these',
  ],
  [
    { CACHE_KEY_PREFIX: '' },
    [],
    'CACHE_KEY_PREFIX: expected a non-empty key prefix without "{" or "}", got ""',
  ],
  [
    { CACHE_KEY_PREFIX: 'rl{x}' },
    [],
    'CACHE_KEY_PREFIX: expected a non-empty key prefix without "{" or "}", got "rl{x}"',
  ],
  [{ SHADOW_MODE: 'yes' }, [], `SHADOW_MODE: ${BOOL} "yes"`],
  [{ QUOTA_MODE: 'on' }, [], `QUOTA_MODE: ${BOOL} "on"`],
  [{ MERGE_DOMAIN_CONFIG: 'enabled' }, [], `MERGE_DOMAIN_CONFIG: ${BOOL} "enabled"`],
  [{ LIMIT_RESPONSE_HEADERS_ENABLED: '' }, [], `LIMIT_RESPONSE_HEADERS_ENABLED: ${BOOL} ""`],
  [{ RESPONSE_DYNAMIC_METADATA: '2' }, [], `RESPONSE_DYNAMIC_METADATA: ${BOOL} "2"`],
  [{ RUNTIME_WATCH_ROOT: 'no' }, [], `RUNTIME_WATCH_ROOT: ${BOOL} "no"`],
  [{ RUNTIME_IGNOREDOTFILES: 'y' }, [], `RUNTIME_IGNOREDOTFILES: ${BOOL} "y"`],
  [{ NEAR_LIMIT_RATIO: '0' }, [], `NEAR_LIMIT_RATIO: ${RATIO} "0"`],
  [{ NEAR_LIMIT_RATIO: '1.5' }, [], `NEAR_LIMIT_RATIO: ${RATIO} "1.5"`],
  [{ NEAR_LIMIT_RATIO: 'high' }, [], `NEAR_LIMIT_RATIO: ${RATIO} "high"`],
  [{ LIMIT_LIMIT_HEADER: 'Rate Limit' }, [], `LIMIT_LIMIT_HEADER: ${HEADER} "Rate Limit"`],
  [{ LIMIT_REMAINING_HEADER: '' }, [], `LIMIT_REMAINING_HEADER: ${HEADER} ""`],
  [{ LIMIT_RESET_HEADER: 'X:Y' }, [], `LIMIT_RESET_HEADER: ${HEADER} "X:Y"`],
  [
    { LOG_LEVEL: 'loud' },
    [],
    'LOG_LEVEL: expected one of trace, debug, info, warn, warning, error, fatal, panic, got "loud"',
  ],
  [{ LOG_FORMAT: 'xml' }, [], 'LOG_FORMAT: expected one of json, text, got "xml"'],
  [
    { SLUICE_LEASE_CONTROLLERS: '127.0.0.1:1' },
    ['--lease-policies', 'nope'],
    '--lease-policies: no rule or policy named "nope" is loaded; loaded: payments.tenant, payments-transfers',
  ],
  [
    { SLUICE_LEASE_CONTROLLERS: '127.0.0.1:1', SLUICE_LEASE_POLICIES: 'payments.tenant' },
    [],
    'SLUICE_LEASE_POLICIES: "payments.tenant" has a bucket per value (examples/envoy/config.yaml: descriptors[0] (key "tenant") has no value); a lease is one budget for the whole rule, so lease a rule whose descriptors all have fixed values',
  ],
  [
    {
      SLUICE_LEASE_CONTROLLERS: '127.0.0.1:1',
      SLUICE_LEASE_POLICIES: 'payments-transfers',
      SLUICE_LEASE_FALLBACK: 'allow-all',
    },
    [],
    'SLUICE_LEASE_FALLBACK: expected deny, store, or a static rate in units per second (a number ≥ 0), got "allow-all"',
  ],
  [
    {},
    ['--lease-fallback', 'deny'],
    '--lease-fallback: applies only with SLUICE_LEASE_CONTROLLERS (the controllers to take leases from)',
  ],
];

describe.concurrent('sluice serve refuses a bad setting before opening a port', () => {
  for (const [env, args, line] of rows) {
    const given = [...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...args].join(' ');
    it(given, async () => {
      const r = await serve(env, args);
      expect(r.served).toBe(false);
      expect(r).toEqual({
        code: 1,
        stdout: '',
        stderr: `sluice: ${line} [SLUICE_ERR_CONFIG_INVALID]\n`,
        served: false,
      });
    });
  }

  it('reports every problem at once, each naming its variable or flag', async () => {
    const r = await serve({ PORT: 'abc', STORE_TIMEOUT_MS: '0', SHADOW_MODE: 'yes' }, [
      '--grpc-port',
      '99999',
      '--redis',
      'localhost',
    ]);
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: [
        'sluice: 5 problems [SLUICE_ERR_CONFIG_INVALID]:',
        `  PORT: ${PORT} "abc"`,
        `  --grpc-port: ${PORT} "99999"`,
        `  STORE_TIMEOUT_MS: ${TIMEOUT} "0"`,
        `  SHADOW_MODE: ${BOOL} "yes"`,
        '  --redis: expected host:port or a redis:// or rediss:// URL with a host and a port, got "localhost"',
        '',
      ].join('\n'),
      served: false,
    });
  });

  it('starts with good values from both (the control: the harness sees a start)', async () => {
    const r = await serve({ STORE_TIMEOUT_MS: '250', SHADOW_MODE: 'True' }, ['--port', '0']);
    expect(r.served).toBe(true);
  });
});
