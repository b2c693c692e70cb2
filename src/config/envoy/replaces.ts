/** What `replaces` needs to know about a matched rule. */
export interface ReplaceableRule {
  readonly name: string;
  readonly replaces: readonly string[];
  readonly unlimited: boolean;
}

/**
 * Which descriptors of one request lose their limit to `replaces` (service/ratelimit.go,
 * `constructLimitsToCheck`), one flag per descriptor, `undefined` meaning "no rule":
 *
 * 1. the `replaces` names of every matched rule are collected, including rules that are
 *    unlimited and rules that are themselves replaced (there is no ordering or chain);
 * 2. a limited rule with a non-empty `name` in that set is dropped: its descriptor is
 *    answered OK with no current limit, and nothing is counted for it;
 * 3. unlimited rules are never dropped (they answer OK either way), and rules without
 *    a name can never be replaced (a request-supplied limit has none).
 *
 * Two rules that name each other both drop. A rule cannot name itself (rejected when
 * loading).
 */
export function replacedMask(rules: readonly (ReplaceableRule | undefined)[]): boolean[] {
  const replaced = new Set<string>();
  for (const r of rules) for (const name of r?.replaces ?? []) replaced.add(name);
  return rules.map((r) => r !== undefined && !r.unlimited && r.name !== '' && replaced.has(r.name));
}
