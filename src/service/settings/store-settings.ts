import { optionalSetting, setting } from './setting.js';
import {
  anyText,
  goBool,
  goDurationMs,
  oneOf,
  settingValue,
  wholeNumber,
} from '../../config/env-values.js';
import { MAX_LOCAL_CACHE_BYTES } from './values.js';

/** Where buckets are kept: the main Redis (or none: the memory store), its TLS, the per-second Redis, the key prefix and the over-limit cache. */
export const STORE_SETTINGS = {
  redisUrl: optionalSetting({
    env: 'REDIS_URL',
    value: settingValue('host:port or a redis:// URL (unset: the embedded memory store)', (t) =>
      t === '' ? undefined : t,
    ),
    feeds: 'redis',
    flags: [
      {
        spec: '--redis <url>',
        help: 'Redis host:port or redis:// URL (with REDIS_AUTH, REDIS_TYPE, for Sentinel REDIS_SENTINEL_AUTH)',
      },
      {
        spec: '--redis-cluster <host:port,...>',
        help: 'Redis Cluster seed nodes, comma-separated (as REDIS_URL with REDIS_TYPE=cluster; REDIS_AUTH applies)',
        also: { setting: 'redisType', value: 'cluster' },
      },
    ],
    allowed: '`host:port` or a `redis://`/`rediss://` URL; for a cluster a `host:port,...` list',
    shownDefault: 'unset: the embedded memory store',
  }),
  redisAuth: setting({
    env: 'REDIS_AUTH',
    value: anyText,
    default: '',
    feeds: 'redis',
    allowed: 'a password, or `user:password`; applied unless the URL has one',
    shownDefault: 'none',
  }),
  redisType: setting({
    env: 'REDIS_TYPE',
    value: oneOf({ single: 'single', cluster: 'cluster', sentinel: 'sentinel' } as const),
    default: 'single',
    feeds: 'redis',
    allowed: '`single` or `cluster`, any case (`sentinel` is refused)',
    shownDefault: '`single`',
  }),
  redisSentinelAuth: setting({
    env: 'REDIS_SENTINEL_AUTH',
    value: anyText,
    default: '',
    feeds: 'redis',
    allowed:
      "with `REDIS_TYPE=sentinel`: a password, or `user:password`, for the Sentinels (`REDIS_AUTH` is the nodes')",
    shownDefault: 'none',
  }),
  redisTls: setting({
    env: 'REDIS_TLS',
    value: goBool,
    default: false,
    feeds: 'redisTls',
    allowed: 'a boolean: TLS to Redis (a `rediss://` URL turns it on too)',
    shownDefault: 'false',
  }),
  redisTlsCaCert: setting({
    env: 'REDIS_TLS_CACERT',
    value: anyText,
    default: '',
    target: 'redisTls.caFile',
    omitEmpty: true,
    allowed: "a PEM file of CA certificates to verify Redis with (empty: the system's)",
    shownDefault: 'empty',
  }),
  redisTlsClientCert: setting({
    env: 'REDIS_TLS_CLIENT_CERT',
    value: anyText,
    default: '',
    target: 'redisTls.certFile',
    omitEmpty: true,
    allowed: 'a PEM client certificate, for a Redis that asks for one (with the key)',
    shownDefault: 'empty',
  }),
  redisTlsClientKey: setting({
    env: 'REDIS_TLS_CLIENT_KEY',
    value: anyText,
    default: '',
    target: 'redisTls.keyFile',
    omitEmpty: true,
    allowed: 'its PEM private key',
    shownDefault: 'empty',
  }),
  redisTlsSkipHostnameVerification: setting({
    env: 'REDIS_TLS_SKIP_HOSTNAME_VERIFICATION',
    value: goBool,
    default: false,
    target: 'redisTls.skipHostnameVerification',
    allowed: 'a boolean: verify the chain, not the host name',
    shownDefault: 'false',
  }),
  redisTimeoutMs: optionalSetting({
    env: 'REDIS_TIMEOUT',
    value: settingValue('a duration above 0 such as 250ms or 10s, at most 596h', (t) => {
      const ms = goDurationMs(t);
      return ms !== undefined && ms > 0 && ms <= 2 ** 31 - 1 ? ms : undefined;
    }),
    target: 'redisTimeoutMs',
    allowed:
      "a Go duration above 0: a Redis call unanswered this long makes the store reopen its connection (a decision's deadline is `STORE_TIMEOUT_MS`)",
    shownDefault: '`2s`',
  }),
  redisPerSecond: setting({
    env: 'REDIS_PERSECOND',
    value: goBool,
    default: false,
    feeds: 'redisPerSecond',
    allowed:
      'a boolean: decide the rules whose unit is `second` in a second Redis, opened as the main one is (`REDIS_TLS` and its files, `REDIS_TIMEOUT`, the start-up wait, script stats)',
    shownDefault: 'false',
  }),
  redisPerSecondUrl: optionalSetting({
    env: 'REDIS_PERSECOND_URL',
    value: settingValue('host:port or a redis:// URL', (t) => (t === '' ? undefined : t)),
    feeds: 'redisPerSecond',
    allowed: 'as `REDIS_URL`; required with `REDIS_PERSECOND`',
    shownDefault: 'none',
  }),
  redisPerSecondAuth: setting({
    env: 'REDIS_PERSECOND_AUTH',
    value: anyText,
    default: '',
    feeds: 'redisPerSecond',
    allowed: 'as `REDIS_AUTH`, for the per-second Redis',
    shownDefault: 'none',
  }),
  redisPerSecondType: setting({
    env: 'REDIS_PERSECOND_TYPE',
    value: oneOf({ single: 'single', cluster: 'cluster' } as const, 'single or cluster'),
    default: 'single',
    feeds: 'redisPerSecond',
    allowed: '`single` or `cluster`, any case',
    shownDefault: '`single`',
  }),
  keyPrefix: setting({
    env: 'CACHE_KEY_PREFIX',
    value: settingValue('a non-empty key prefix without "{" or "}"', (t) =>
      t === '' || /[{}]/.test(t) ? undefined : t,
    ),
    default: 'sl',
    target: 'keyPrefix',
    checksOption: true,
    allowed: 'non-empty, without `{` or `}`',
    shownDefault: '`sl`',
  }),
  localCacheSizeBytes: setting({
    env: 'LOCAL_CACHE_SIZE_IN_BYTES',
    value: wholeNumber(0, MAX_LOCAL_CACHE_BYTES, ' of bytes'),
    default: 0,
    target: 'localCacheSizeBytes',
    checksOption: true,
    allowed:
      "a whole number of bytes, 0-1073741824: the over-limit cache's bound ([local-and-batching.md](local-and-batching.md)); 0 is off",
    shownDefault: '0',
  }),
} as const;
