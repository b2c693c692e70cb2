import type { EnvoyUnit } from './envoy-config.js';
import type { EnvoyEntry } from './match.js';
import { windowStartMs } from './window.js';

/**
 * Upstream's Redis/Memcached key for one descriptor's counter in the current window
 * (limiter/cache_key.go): `<prefix><domain>_` then `<key>_<value>_` per entry, then the
 * window start in Unix seconds, e.g. `messaging_to_number_2061111111_1700000040` for a
 * minute limit. `bucketValues` come from the match (`RuleMatch.bucketValues`); the
 * request's own values when the limit came from the request. Keys built this way are
 * not escaped (`a_b`/`c` and `a`/`b_c` collide), exactly as upstream's.
 */
export function envoyCacheKey(
  prefix: string,
  domain: string,
  entries: readonly EnvoyEntry[],
  bucketValues: readonly string[],
  unit: EnvoyUnit,
  nowMs: number,
): string {
  let key = `${prefix}${domain}_`;
  entries.forEach((e, i) => {
    key += `${e.key}_${bucketValues[i] ?? e.value}_`;
  });
  return key + String(windowStartMs(unit, nowMs) / 1_000);
}
