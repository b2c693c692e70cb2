import { PolicyError } from '../core/errors.js';

/**
 * The Redis URL the service connects to, from upstream-style settings: `REDIS_URL` may
 * be upstream's `host:port` (no scheme) or a `redis://` / `rediss://` URL; `REDIS_AUTH`
 * (upstream's password setting, `password` or `user:password`) is added when the URL
 * carries none; `REDIS_TYPE` must be `single` (the default) — `cluster` and `sentinel`
 * are refused with a clear error until they are supported.
 */
export function redisUrlFromSettings(settings: {
  readonly url: string;
  readonly auth?: string | undefined;
  readonly type?: string | undefined;
}): string {
  const type = (settings.type ?? 'single').toLowerCase();
  if (type !== 'single') {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      `REDIS_TYPE=${settings.type}: only "single" is supported so far (Redis Cluster and Sentinel are not yet)`,
    );
  }
  const withScheme = /^rediss?:\/\//.test(settings.url) ? settings.url : `redis://${settings.url}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      `REDIS_URL: not host:port or a redis:// URL: ${JSON.stringify(settings.url)}`,
    );
  }
  if (url.hostname === '' || url.port === '') {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      `REDIS_URL: needs a host and a port: ${JSON.stringify(settings.url)}`,
    );
  }
  if (settings.auth !== undefined && settings.auth !== '' && url.password === '') {
    const colon = settings.auth.indexOf(':');
    if (colon >= 0) {
      url.username = settings.auth.slice(0, colon);
      url.password = settings.auth.slice(colon + 1);
    } else {
      url.password = settings.auth;
    }
  }
  return url.toString();
}
