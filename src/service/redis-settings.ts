import { expectedGot } from '../config/env-values.js';
import { PolicyError } from '../core/errors.js';

/** Refuses `setting`'s value; the issue's path is the setting, so callers can re-home it. */
function refuse(setting: string, message: string): PolicyError {
  return new PolicyError('SLUICE_ERR_CONFIG_INVALID', `${setting}: ${message}`, {
    issues: [{ path: setting, message }],
  });
}

/** What a single server's `REDIS_URL` may be, for messages. */
const REDIS_URL_FORMS = 'host:port or a redis:// or rediss:// URL with a host and a port';

/** Where {@link redisTargetFromSettings} takes its input from. */
export interface RedisSettings {
  readonly url: string;
  readonly auth?: string | undefined;
  readonly type?: string | undefined;
  /** `REDIS_SENTINEL_AUTH`: `password` or `user:password` for the Sentinels. */
  readonly sentinelAuth?: string | undefined;
  /** The setting `url` came from, to name in errors. @default "REDIS_URL" */
  readonly urlSetting?: string;
}

/** Where the service's Redis is: one server, or a Redis Cluster. */
export type RedisTarget =
  | { readonly type: 'single'; readonly url: string }
  | {
      readonly type: 'cluster';
      /** Seed nodes; the rest of the cluster is discovered from them. */
      readonly nodes: readonly { readonly host: string; readonly port: number }[];
      readonly username?: string;
      readonly password?: string;
    }
  | {
      readonly type: 'sentinel';
      /** The master name the Sentinels monitor. */
      readonly name: string;
      readonly sentinels: readonly { readonly host: string; readonly port: number }[];
      readonly sentinelUsername?: string;
      readonly sentinelPassword?: string;
      readonly username?: string;
      readonly password?: string;
    };

/** `password` or `user:password` as ioredis options. */
function credentials(auth: string | undefined, prefix: '' | 'sentinel'): Record<string, string> {
  if (auth === undefined || auth === '') return {};
  const [user, pass] =
    prefix === '' ? ['username', 'password'] : ['sentinelUsername', 'sentinelPassword'];
  const colon = auth.indexOf(':');
  return colon >= 0
    ? { [user]: auth.slice(0, colon), [pass]: auth.slice(colon + 1) }
    : { [pass]: auth };
}

/**
 * The Redis the service connects to, from upstream-style settings. `REDIS_TYPE` is
 * `single` (the default), `cluster` (then `REDIS_URL` is a comma-separated list of
 * `host:port` seed nodes, as upstream takes it), or `sentinel` (then `REDIS_URL` is the
 * master name followed by the Sentinels' `host:port`, comma-separated, as upstream takes
 * it, and `REDIS_SENTINEL_AUTH` authenticates to the Sentinels). `REDIS_AUTH`
 * (`password` or `user:password`) applies to every Redis node.
 */
export function redisTargetFromSettings(settings: RedisSettings): RedisTarget {
  const type = (settings.type ?? 'single').toLowerCase();
  const setting = settings.urlSetting ?? 'REDIS_URL';
  if (type === 'sentinel') {
    const [name = '', ...rest] = settings.url.split(',').map((p) => p.trim());
    if (name === '' || name.includes(':') || rest.length === 0) {
      throw refuse(
        setting,
        expectedGot(
          'the master name, then the Sentinels: <master name>,<host:port>[,<host:port>...] (REDIS_TYPE=sentinel)',
          settings.url,
        ),
      );
    }
    return {
      type: 'sentinel',
      name,
      sentinels: clusterNodesFromList(rest.join(','), setting, 'a Redis Sentinel'),
      ...credentials(settings.sentinelAuth, 'sentinel'),
      ...credentials(settings.auth, ''),
    };
  }
  if (type !== 'cluster') return { type: 'single', url: redisUrlFromSettings(settings) };
  const nodes = clusterNodesFromList(settings.url, setting);
  const auth = settings.auth ?? '';
  const colon = auth.indexOf(':');
  return {
    type: 'cluster',
    nodes,
    ...(auth === ''
      ? {}
      : colon >= 0
        ? { username: auth.slice(0, colon), password: auth.slice(colon + 1) }
        : { password: auth }),
  };
}

/**
 * Parses `host:port,host:port,...` (IPv6 hosts in brackets: `[::1]:7000`) into nodes;
 * `setting` names the source in errors.
 */
export function clusterNodesFromList(
  list: string,
  setting: string,
  what = 'a Redis Cluster node',
): { readonly host: string; readonly port: number }[] {
  const parts = list
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (parts.length === 0) {
    throw refuse(
      setting,
      expectedGot('a comma-separated list of host:port (Redis Cluster seed nodes)', list),
    );
  }
  return parts.map((part) => {
    const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(part);
    const port = m === null ? NaN : Number(m[3]);
    if (m === null || port < 1 || port > 65_535) {
      throw refuse(setting, expectedGot(`host:port of ${what}`, part));
    }
    return { host: m[1] ?? m[2]!, port };
  });
}

/**
 * The Redis URL of a single server, from upstream-style settings: `REDIS_URL` may be
 * upstream's `host:port` (no scheme) or a `redis://` / `rediss://` URL; `REDIS_AUTH`
 * (upstream's password setting, `password` or `user:password`) is added when the URL
 * carries none; `REDIS_TYPE` must be `single` (the default) here — use
 * {@link redisTargetFromSettings} for `cluster` and `sentinel`.
 */
export function redisUrlFromSettings(settings: RedisSettings): string {
  const setting = settings.urlSetting ?? 'REDIS_URL';
  const type = (settings.type ?? 'single').toLowerCase();
  if (type !== 'single') {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      type === 'cluster'
        ? `REDIS_TYPE=${settings.type}: a cluster has no single URL (use a comma-separated host:port list)`
        : type === 'sentinel'
          ? `REDIS_TYPE=${settings.type}: Sentinel has no single URL (use <master name>,<host:port>,...)`
          : `REDIS_TYPE=${settings.type}: only "single", "cluster" and "sentinel" are supported`,
    );
  }
  const withScheme = /^rediss?:\/\//.test(settings.url) ? settings.url : `redis://${settings.url}`;
  const bad = (): PolicyError => refuse(setting, expectedGot(REDIS_URL_FORMS, settings.url));
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw bad();
  }
  if (url.hostname === '' || url.port === '') throw bad();
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
