import type { EnvoyConfig, EnvoyDescriptorLevel } from '../config/envoy/envoy-config.js';

/** Upstream's `/rlconfig` dump of `config`: one line per rule. */
export function rlconfig(config: EnvoyConfig): string {
  const lines: string[] = [];
  const walk = (level: EnvoyDescriptorLevel): void => {
    for (const node of Object.values(level.nodes)) {
      const rule = node.rule;
      if (rule !== undefined) {
        const limit = rule.unlimited
          ? 'unlimited'
          : `unit=${(rule.unit ?? '').toUpperCase()} requests_per_unit=${rule.requestsPerUnit}`;
        lines.push(
          `${rule.fullKey}: ${limit}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}`,
        );
      }
      walk(node.children);
    }
  };
  for (const d of Object.values(config.domains)) walk(d.descriptors);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
