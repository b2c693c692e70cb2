import { collapsed, goString, type GoNode } from './yaml-tree.js';

/**
 * Every key name envoyproxy/ratelimit accepts, at any depth: upstream checks names
 * against this one flat list (so `unit` at the top level passes this check and is then
 * ignored), plus Sluice's `sluice` block.
 */
export const ENVOY_KEYS: ReadonlySet<string> = new Set([
  'domain',
  'key',
  'value',
  'descriptors',
  'rate_limit',
  'unit',
  'requests_per_unit',
  'unlimited',
  'shadow_mode',
  'quota_mode',
  'name',
  'replaces',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'sluice',
]);

/** Keys whose contents are not key-checked: free-form `metadata`, and `sluice` (own checks). */
const OPAQUE_KEYS: ReadonlySet<string> = new Set(['metadata', 'sluice']);

/**
 * Upstream's key check, run before anything else reads the file: every map key must be
 * a string from {@link ENVOY_KEYS}, every list item a map, and every other value a
 * string, int, bool or null. Returns every problem found, in document order (upstream
 * stops at the first, and walks maps in random order).
 */
export function validateKeys(root: GoNode): string[] {
  const problems: string[] = [];
  const walkMap = (node: GoNode): void => {
    if (node.kind !== 'map') return;
    for (const { key, value } of collapsed(node)) {
      if (key.kind !== 'scalar' || key.typed.kind !== 'string') {
        problems.push(`config error, key is not of type string: ${goString(key)}`);
        continue;
      }
      if (!ENVOY_KEYS.has(key.text)) {
        problems.push(`config error, unknown key '${key.text}'`);
        continue;
      }
      if (OPAQUE_KEYS.has(key.text)) continue;
      if (value.kind === 'seq') {
        for (const item of value.items) {
          if (item.kind === 'map') walkMap(item);
          else {
            problems.push(
              `config error, yaml file contains list of type other than map: ${goString(item)}`,
            );
          }
        }
      } else if (value.kind === 'map') {
        walkMap(value);
      } else if (!['string', 'int', 'bool', 'nil'].includes(value.typed.kind)) {
        // A float, or an integer beyond int64: neither is a type upstream expects.
        problems.push('error checking config');
      }
    }
  };
  walkMap(root);
  return problems;
}
