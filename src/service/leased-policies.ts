import {
  publicRuleName,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
} from '../config/envoy/envoy-config.js';
import type { PolicySet } from '../config/policies.js';

/**
 * Why each of `names` cannot take a quota lease in this config, one message per name
 * (none when all can). A lease is one budget for the whole rule or policy (one RLQS
 * bucket, `policy=NAME`), so a name must be loaded, and every bucket it counts must be
 * the same one: each descriptor level on an envoy rule's path has a fixed value (a
 * wildcard value only with `share_threshold`), and each match entry of a native policy
 * has a value. A rule with a bucket per value (per tenant, per address) would otherwise
 * become one shared budget.
 */
export function leasedPolicyProblems(
  names: readonly string[],
  envoy: EnvoyConfig,
  policies: PolicySet | undefined,
): string[] {
  /** Per public name: `undefined` when one bucket, else where the values vary. */
  const found = new Map<string, string | undefined>();
  const note = (name: string, perValue: string | undefined): void => {
    // Several rules can share a name; one with a bucket per value is enough to refuse.
    if (!found.has(name) || perValue !== undefined) found.set(name, perValue);
  };
  for (const p of policies?.policies ?? []) {
    const open = p.match.find((m) => m.value === undefined);
    note(p.name, open === undefined ? undefined : `match key "${open.key}" has no value`);
  }
  for (const d of Object.values(envoy.domains)) {
    const walk = (level: EnvoyDescriptorLevel, perValue: string | undefined): void => {
      for (const node of Object.values(level.nodes)) {
        const fixed =
          node.value !== undefined && (!node.value.includes('*') || node.shareThreshold);
        const here =
          perValue ??
          (fixed
            ? undefined
            : `${node.file}: ${node.path} (key "${node.key}") has ${node.value === undefined ? 'no value' : 'a wildcard value'}`);
        if (node.rule !== undefined) note(publicRuleName(node.rule), here);
        walk(node.children, here);
      }
    };
    walk(d.descriptors, undefined);
  }
  return names.flatMap((name) => {
    if (!found.has(name)) {
      const loaded = [...found.keys()].join(', ') || 'none';
      return [`no rule or policy named ${JSON.stringify(name)} is loaded; loaded: ${loaded}`];
    }
    const perValue = found.get(name);
    return perValue === undefined
      ? []
      : [
          `${JSON.stringify(name)} has a bucket per value (${perValue}); a lease is one budget for the whole rule, so lease a rule whose descriptors all have fixed values`,
        ];
  });
}
