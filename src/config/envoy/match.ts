import type {
  EnvoyConfig,
  EnvoyDescriptorLevel,
  EnvoyDescriptorNode,
  EnvoyRule,
} from './envoy-config.js';
import { matchWildcard } from './wildcard.js';

/** One request descriptor entry. Keys may repeat; values may be empty. */
export interface EnvoyEntry {
  readonly key: string;
  readonly value: string;
}

/** How one entry was matched at its level. */
export type MatchVia = 'exact' | 'wildcard' | 'default';

/** A rule found for a descriptor (upstream: `GetLimit` without a request override). */
export interface RuleMatch {
  readonly rule: EnvoyRule;
  readonly node: EnvoyDescriptorNode;
  /** How each entry matched, one per entry. */
  readonly via: readonly MatchVia[];
  /**
   * The metric key upstream reports this request under (its `FullKey`): the configured
   * key, rewritten by the rule's `detailed_metric`, the path's `value_to_metric` and
   * `share_threshold` flags.
   */
  readonly statsKey: string;
  /**
   * The value each entry contributes to the bucket key: the request's value, whether
   * the entry matched exactly, by wildcard or by default; except entries matched by a
   * `share_threshold` wildcard, which contribute the pattern (e.g. `files/*`), so every
   * matching value shares one bucket.
   */
  readonly bucketValues: readonly string[];
}

const trimPrefix = (s: string, prefix: string): string =>
  s.startsWith(prefix) ? s.slice(prefix.length) : s;

/** One level's lookup: exact `key_value`, then wildcards in load order, then `key`. */
function lookup(
  level: EnvoyDescriptorLevel,
  entry: EnvoyEntry,
): { node: EnvoyDescriptorNode; via: MatchVia; pattern?: string } | undefined {
  const composite = `${entry.key}_${entry.value}`;
  const exact = level.nodes[composite];
  if (exact !== undefined) return { node: exact, via: 'exact' };
  for (const w of level.wildcards) {
    if (matchWildcard(w.parts, composite)) {
      const node = level.nodes[w.compositeKey];
      if (node !== undefined) return { node, via: 'wildcard', pattern: w.compositeKey };
    }
  }
  const byKey = level.nodes[entry.key];
  return byKey === undefined ? undefined : { node: byKey, via: 'default' };
}

/**
 * Finds the rule for one descriptor of `domain`, exactly as envoyproxy/ratelimit does
 * (config_impl.go, `GetLimit`):
 *
 * 1. Entry i is looked up among the children of the node matched for entry i-1 (the
 *    domain's top level for the first): first the composite key `key_value`; if absent,
 *    the wildcard children in load order, first match wins (patterns are matched
 *    against `key_value`); if none matches, the key-only child `key`.
 * 2. There is no backtracking: once an entry matched a node, a failure deeper down is
 *    not retried with a wildcard or key-only sibling.
 * 3. The walk stops at an entry that matches nothing, or at a node without children.
 * 4. The rule is the `rate_limit` of the node matched by the last entry. A node's
 *    rule never applies to a longer descriptor, and a node without `rate_limit` (a
 *    placeholder) gives no rule: the depth must match exactly.
 *
 * Returns `undefined` for an unknown domain, no entries, or no rule. An unlimited rule
 * is returned too (it matches; it is just never limited).
 */
export function findRule(
  config: EnvoyConfig,
  domain: string,
  entries: readonly EnvoyEntry[],
): RuleMatch | undefined {
  const d = config.domains[domain];
  if (d === undefined) return undefined;
  let level = d.descriptors;
  const via: MatchVia[] = [];
  const detailedParts = [domain];
  const metricParts = [domain];
  const sharePatterns = new Map<number, string>();
  let found: EnvoyDescriptorNode | undefined;

  for (const [i, entry] of entries.entries()) {
    detailedParts.push(`${entry.key}_${entry.value}`);
    const hit = lookup(level, entry);
    if (hit === undefined) {
      metricParts.push(entry.key);
      break;
    }
    via.push(hit.via);
    const { node } = hit;
    const ownPattern =
      hit.pattern === undefined ? undefined : trimPrefix(hit.pattern, `${entry.key}_`);
    if (ownPattern !== undefined && node.shareThreshold) sharePatterns.set(i, ownPattern);
    metricParts.push(metricPart(entry, hit.via, node, ownPattern, sharePatterns.get(i)));
    if (node.rule !== undefined && i === entries.length - 1) found = node;
    if (Object.keys(node.children.nodes).length === 0) break;
    level = node.children;
  }
  if (found?.rule === undefined) return undefined;
  const rule = found.rule;
  const shared = (i: number): string | undefined => sharePatterns.get(i);
  const bucketValues = entries.map((e, i) => shared(i) ?? e.value);
  let statsKey: string;
  if (!rule.detailedMetric) statsKey = metricParts.join('.');
  else if (sharePatterns.size === 0) statsKey = detailedParts.join('.');
  else {
    const parts = entries.map((e, i) => {
      const pattern = shared(i);
      if (pattern !== undefined) return `${e.key}_${pattern}`;
      return e.value === '' ? e.key : `${e.key}_${e.value}`;
    });
    statsKey = [domain, ...parts].join('.');
  }
  return { rule, node: found, via, statsKey, bucketValues };
}

/**
 * One entry's part of the metric key without `detailed_metric`: the key, plus a value
 * when one is known to be wanted. A wildcard match shows the shared pattern
 * (`share_threshold`), else the request's value (`value_to_metric`), else the pattern;
 * an exact match shows the value; a key-only match shows the value only with
 * `value_to_metric`. Empty values are left out with their `_`.
 */
function metricPart(
  entry: EnvoyEntry,
  via: MatchVia,
  node: EnvoyDescriptorNode,
  pattern: string | undefined,
  sharedPattern: string | undefined,
): string {
  let value: string;
  if (via === 'wildcard')
    value = sharedPattern ?? (node.valueToMetric ? entry.value : (pattern ?? ''));
  else if (via === 'exact') value = entry.value;
  else value = node.valueToMetric ? entry.value : '';
  return value === '' ? entry.key : `${entry.key}_${value}`;
}
