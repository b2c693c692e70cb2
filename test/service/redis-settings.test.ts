import { describe, expect, it } from 'vitest';
import { redisTargetFromSettings, redisUrlFromSettings } from '../../src/service/redis-settings.js';

describe('Redis settings (REDIS_URL, REDIS_AUTH, REDIS_TYPE)', () => {
  it("accepts upstream's host:port and redis:// URLs", () => {
    expect(redisUrlFromSettings({ url: '127.0.0.1:6379' })).toBe('redis://127.0.0.1:6379');
    expect(redisUrlFromSettings({ url: 'redis://127.0.0.1:6380/2' })).toBe(
      'redis://127.0.0.1:6380/2',
    );
    expect(redisUrlFromSettings({ url: 'rediss://cache.internal:6380' })).toBe(
      'rediss://cache.internal:6380',
    );
  });

  it('adds REDIS_AUTH as the password (or user:password) unless the URL has one', () => {
    expect(redisUrlFromSettings({ url: '127.0.0.1:6379', auth: 's3cret' })).toBe(
      'redis://:s3cret@127.0.0.1:6379',
    );
    expect(redisUrlFromSettings({ url: '127.0.0.1:6379', auth: 'app:p@ss' })).toBe(
      'redis://app:p%40ss@127.0.0.1:6379',
    );
    expect(redisUrlFromSettings({ url: 'redis://:own@127.0.0.1:6379', auth: 'other' })).toBe(
      'redis://:own@127.0.0.1:6379',
    );
  });

  it('refuses what it cannot honour, naming the setting', () => {
    expect(() => redisUrlFromSettings({ url: '127.0.0.1:6379', type: 'sentinel' })).toThrow(
      'REDIS_TYPE=sentinel: Sentinel has no single URL (use <master name>,<host:port>,...)',
    );
    expect(() => redisTargetFromSettings({ url: '127.0.0.1:6379', type: 'sentinel' })).toThrow(
      'REDIS_URL: expected the master name, then the Sentinels: <master name>,<host:port>[,<host:port>...] (REDIS_TYPE=sentinel), got "127.0.0.1:6379"',
    );
    expect(() => redisTargetFromSettings({ url: 'mymaster', type: 'sentinel' })).toThrow(
      'REDIS_URL: expected the master name, then the Sentinels: <master name>,<host:port>[,<host:port>...] (REDIS_TYPE=sentinel), got "mymaster"',
    );
    expect(() =>
      redisTargetFromSettings({ url: 'mymaster,10.0.0.1:26379,nope', type: 'sentinel' }),
    ).toThrow('REDIS_URL: expected host:port of a Redis Sentinel, got "nope"');
    expect(() => redisUrlFromSettings({ url: 'localhost' })).toThrow(
      'REDIS_URL: expected host:port or a redis:// or rediss:// URL with a host and a port, got "localhost"',
    );
    expect(() => redisUrlFromSettings({ url: 'a b:c' })).toThrow(
      'REDIS_URL: expected host:port or a redis:// or rediss:// URL with a host and a port, got "a b:c"',
    );
  });

  it('REDIS_TYPE=sentinel takes REDIS_URL as the master name then the Sentinels; REDIS_SENTINEL_AUTH for the Sentinels, REDIS_AUTH for the nodes', () => {
    expect(
      redisTargetFromSettings({
        url: 'mymaster,10.0.0.1:26379, 10.0.0.2:26379,[::1]:26380',
        type: 'SENTINEL',
        sentinelAuth: 'watcher:w@tch',
        auth: 'app-secret',
      }),
    ).toEqual({
      type: 'sentinel',
      name: 'mymaster',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      sentinelUsername: 'watcher',
      sentinelPassword: 'w@tch',
      password: 'app-secret',
    });
    expect(
      redisTargetFromSettings({ url: 'm,127.0.0.1:26379', type: 'sentinel', sentinelAuth: 'pw' }),
    ).toEqual({
      type: 'sentinel',
      name: 'm',
      sentinels: [{ host: '127.0.0.1', port: 26379 }],
      sentinelPassword: 'pw',
    });
  });

  it('REDIS_TYPE=cluster takes REDIS_URL as a comma-separated host:port list, REDIS_AUTH for every node', () => {
    expect(
      redisTargetFromSettings({
        url: '127.0.0.1:7000, 127.0.0.1:7001,[::1]:7002',
        type: 'cluster',
        auth: 'app:pw',
      }),
    ).toEqual({
      type: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7000 },
        { host: '127.0.0.1', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      username: 'app',
      password: 'pw',
    });
    expect(redisTargetFromSettings({ url: '127.0.0.1:6379' })).toEqual({
      type: 'single',
      url: 'redis://127.0.0.1:6379',
    });
    expect(() => redisTargetFromSettings({ url: '127.0.0.1', type: 'cluster' })).toThrow(
      'REDIS_URL: expected host:port of a Redis Cluster node, got "127.0.0.1"',
    );
    expect(() => redisTargetFromSettings({ url: ' , ', type: 'CLUSTER' })).toThrow(
      'REDIS_URL: expected a comma-separated list of host:port (Redis Cluster seed nodes), got " , "',
    );
  });
});
