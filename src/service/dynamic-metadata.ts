import type { EnvoyRule } from '../config/envoy/envoy-config.js';
import type { JsonValue, RlsRequest } from '../protocol/messages.js';

type JsonObject = { [key: string]: JsonValue };

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Adds `src`'s fields missing from `dest`; objects present in both merge recursively. */
function mergeInto(dest: JsonObject, src: Readonly<Record<string, unknown>>): void {
  for (const [k, v] of Object.entries(src)) {
    const have = dest[k];
    if (have === undefined) dest[k] = structuredClone(v) as JsonValue;
    else if (isObject(have) && isObject(v)) mergeInto(have, v);
    // Otherwise the first descriptor's value stays, as upstream keeps it.
  }
}

/**
 * The dynamic metadata upstream returns to envoy under `RESPONSE_DYNAMIC_METADATA`:
 * the domain; each descriptor's entries as `key=value` strings, its limit override and
 * its own `hits_addend` when sent; the request's `hits_addend` when above 1; and the
 * `metadata` of the rules of descriptors that passed (not over their limit, not
 * unlimited), merged in request order — the first value of a key wins, objects merge.
 *
 * `rules[i]` is the rule that decided descriptor `i` (undefined when none or unlimited),
 * `passed[i]` whether it counts as passed.
 */
export function rateLimitDynamicMetadata(
  req: RlsRequest,
  rules: readonly (EnvoyRule | undefined)[],
  passed: readonly boolean[],
): JsonObject {
  const out: JsonObject = {
    domain: req.domain,
    descriptors: req.descriptors.map((d) => {
      const o: JsonObject = { entries: d.entries.map((e) => `${e.key}=${e.value}`) };
      if (d.limit !== undefined)
        o['limit'] = `requests_per_unit:${d.limit.requestsPerUnit} unit:${d.limit.unit}`;
      if (d.hitsAddend !== undefined) o['hitsAddend'] = d.hitsAddend;
      return o;
    }),
  };
  if (req.hitsAddend > 1) out['hitsAddend'] = req.hitsAddend;
  const metadata: JsonObject = {};
  rules.forEach((rule, i) => {
    if (passed[i] && rule?.metadata !== undefined) mergeInto(metadata, rule.metadata);
  });
  if (Object.keys(metadata).length > 0) out['metadata'] = metadata;
  return out;
}
