/**
 * envoyproxy/ratelimit's stat names, so that statsd dashboards built for it read Sluice.
 * Upstream names stats through lyft/gostats scopes: `ratelimit.service.rate_limit.<domain>.<key>.<outcome>`
 * and friends, with `EXTRA_TAGS` serialized into the name for plain statsd.
 */

// An IPv4 address inside a key (`remote_address_10.0.0.1`), whose dots upstream replaces.
const IPV4 = /\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g;

/**
 * A stat key as upstream sanitizes it (`utils.SanitizeStatName`): `:` and `|` become
 * `_`, and so do the dots of IPv4 addresses (`remote_address_10_0_0_1`).
 */
export function sanitizeStatName(key: string): string {
  return key.replace(/[:|]/g, '_').replace(IPV4, (ip) => ip.replace(/\./g, '_'));
}

/** A tag key or value as gostats cleans it: `.`, `:` and `|` become `_`. */
export function cleanTagText(text: string): string {
  return text.replace(/[.:|]/g, '_');
}

/** Tags as gostats keeps them: cleaned, empty keys or values dropped, sorted by key. */
export function cleanTags(tags: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(tags)
    .filter(([k, v]) => k !== '' && v !== '')
    .map(([k, v]): [string, string] => [cleanTagText(k), cleanTagText(v)])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * A name with its tags as gostats writes them for a plain statsd sink:
 * `name.__key=value` per tag, sorted by key.
 */
export function nameWithTags(name: string, tags: readonly [string, string][]): string {
  return name + tags.map(([k, v]) => `.__${k}=${v}`).join('');
}

/**
 * The per-rule stat: `ratelimit.service.rate_limit.<stats key>.<outcome>`, where the
 * rule's stats key starts with its domain (`edge.remote_address_10.0.0.1`).
 */
export function ruleStatName(statsKey: string, outcome: string): string {
  return `ratelimit.service.rate_limit.${sanitizeStatName(statsKey)}.${outcome}`;
}

/** A domain no config has: `ratelimit.service.rate_limit.<domain>.domain_not_found`. */
export function domainNotFoundStatName(domain: string): string {
  return `ratelimit.service.rate_limit.${sanitizeStatName(domain)}.domain_not_found`;
}

/** Service-level stats, named as upstream's `NewServiceStats`. */
export const SERVICE_STAT_NAMES = Object.freeze({
  configLoadSuccess: 'ratelimit.service.config_load_success',
  configLoadError: 'ratelimit.service.config_load_error',
  globalShadowMode: 'ratelimit.service.global_shadow_mode',
  redisError: 'ratelimit.service.call.should_rate_limit.redis_error',
  serviceError: 'ratelimit.service.call.should_rate_limit.service_error',
} as const);

/** The gRPC server's stats per method (upstream's server reporter): `ratelimit_server.<method>.*`. */
export function serverStatName(method: string, stat: 'total_requests' | 'response_time'): string {
  return `ratelimit_server.${method}.${stat}`;
}
