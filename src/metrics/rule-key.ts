/** One level of the rule a descriptor matched, with the request entry that matched it. */
export interface RuleKeyPart {
  /** The descriptor key, e.g. `remote_address`. */
  readonly key: string;
  /** The request's value for that key, e.g. `10.0.0.1`. */
  readonly value: string;
  /**
   * Whether the rule names this value in its configuration (`key: path, value: /login`),
   * as opposed to matching any value. Only named values appear in a non-detailed key.
   */
  readonly valueInConfig: boolean;
}

/**
 * The `rule` label of a matched rule, built as envoyproxy/ratelimit builds its stat keys
 * (`src/config/config_impl.go`), without the domain (that is its own label):
 *
 * - by default the rule's configuration path: `key` per level, `key_value` where the
 *   configuration names the value, joined with `.`. Request values the rule matched by
 *   key only never appear, so the label set stays as small as the configuration:
 *   `[{key:'tenant', value:'acme', valueInConfig:false}, {key:'path', value:'/login', valueInConfig:true}]`
 *   → `tenant.path_/login`.
 * - with `detailed` (the rule sets `detailed_metric`): `key_value` for every level with
 *   the request's values, `tenant_acme.path_/login`. Every distinct value is a new series.
 */
export function ruleMetricKey(parts: readonly RuleKeyPart[], detailed = false): string {
  return parts
    .map((p) => (detailed || (p.valueInConfig && p.value !== '') ? `${p.key}_${p.value}` : p.key))
    .join('.');
}
