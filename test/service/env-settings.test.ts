import { describe, expect, it } from 'vitest';
import { settingsFromEnv } from '../../src/service/env-settings.js';

describe('settingsFromEnv: upstream environment variables', () => {
  it('has upstream defaults (but prefix sl and info logs) when nothing is set', () => {
    expect(settingsFromEnv({})).toEqual({
      keyPrefix: 'sl',
      shadowMode: false,
      quotaMode: false,
      mergeDomainConfig: false,
      nearLimitRatio: 0.8,
      responseDynamicMetadata: false,
      logLevel: 'info',
      logFormatText: false,
      decisionMode: 'per-descriptor',
    });
  });

  it('reads every setting', () => {
    expect(
      settingsFromEnv({
        CACHE_KEY_PREFIX: 'rl',
        SHADOW_MODE: 'true',
        QUOTA_MODE: '1',
        MERGE_DOMAIN_CONFIG: 'T',
        NEAR_LIMIT_RATIO: '0.5',
        LIMIT_RESPONSE_HEADERS_ENABLED: 'True',
        LIMIT_REMAINING_HEADER: 'X-RateLimit-Remaining',
        RESPONSE_DYNAMIC_METADATA: 'true',
        LOG_LEVEL: 'WARNING',
        LOG_FORMAT: 'json',
        SLUICE_DECISION_MODE: 'all-or-nothing',
      }),
    ).toEqual({
      keyPrefix: 'rl',
      shadowMode: true,
      quotaMode: true,
      mergeDomainConfig: true,
      nearLimitRatio: 0.5,
      responseHeaders: {
        limit: 'RateLimit-Limit',
        remaining: 'X-RateLimit-Remaining',
        reset: 'RateLimit-Reset',
      },
      responseDynamicMetadata: true,
      logLevel: 'warn',
      logFormatText: false,
      decisionMode: 'all-or-nothing',
    });
  });

  it('header names are only read when the headers are enabled', () => {
    expect(settingsFromEnv({ LIMIT_LIMIT_HEADER: 'X-L' })).not.toHaveProperty('responseHeaders');
  });

  it.each([
    [{ SHADOW_MODE: 'yes' }, 'SHADOW_MODE="yes": expected a boolean (true/false, 1/0, t/f)'],
    [{ QUOTA_MODE: 'on' }, 'QUOTA_MODE="on": expected a boolean (true/false, 1/0, t/f)'],
    [
      { LIMIT_RESPONSE_HEADERS_ENABLED: 'enabled' },
      'LIMIT_RESPONSE_HEADERS_ENABLED="enabled": expected a boolean (true/false, 1/0, t/f)',
    ],
    [
      { LIMIT_RESPONSE_HEADERS_ENABLED: 'true', LIMIT_RESET_HEADER: 'Rate Limit' },
      'LIMIT_RESET_HEADER="Rate Limit": expected an HTTP header name',
    ],
    [{ NEAR_LIMIT_RATIO: '1.5' }, 'NEAR_LIMIT_RATIO="1.5": expected a number in (0, 1]'],
    [{ NEAR_LIMIT_RATIO: '0' }, 'NEAR_LIMIT_RATIO="0": expected a number in (0, 1]'],
    [{ NEAR_LIMIT_RATIO: 'high' }, 'NEAR_LIMIT_RATIO="high": expected a number in (0, 1]'],
    [
      { LOG_LEVEL: 'loud' },
      'LOG_LEVEL="loud": expected trace, debug, info, warn, warning, error, fatal, panic',
    ],
    [{ LOG_FORMAT: 'xml' }, 'LOG_FORMAT="xml": expected json or text'],
    [{ CACHE_KEY_PREFIX: '' }, 'CACHE_KEY_PREFIX="": expected a non-empty key prefix'],
    [
      { SLUICE_DECISION_MODE: 'all_or_nothing' },
      'SLUICE_DECISION_MODE="all_or_nothing": expected per-descriptor or all-or-nothing',
    ],
  ])('%o is refused: %s', (env, message) => {
    expect(() => settingsFromEnv(env)).toThrow(message);
  });

  it('LOG_FORMAT=text is noted (Sluice logs JSON only)', () => {
    expect(settingsFromEnv({ LOG_FORMAT: 'text' }).logFormatText).toBe(true);
  });
});
