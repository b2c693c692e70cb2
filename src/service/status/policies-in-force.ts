import { algorithmOf } from '../../algorithms/index.js';
import {
  publicRuleName,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
} from '../../config/envoy/envoy-config.js';
import type { PolicySet } from '../../config/policies.js';
import type { PolicyInForce } from './status-snapshot.js';

/** Milliseconds in words: `200 ms`, `1.5 s`, `2 min`. */
function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(1)} min`;
  return `${+(ms / 3_600_000).toFixed(1)} h`;
}

/**
 * The rows of the status page's "Policies in force": every native policy, then every
 * envoy rule in file order (as `/rlconfig` lists them). A native policy's limit is told
 * through its algorithm (capacity, and how long an idle bucket takes to be full again),
 * never by reading its parameters by name.
 */
export function policiesInForce(
  envoy: EnvoyConfig,
  policies: PolicySet | undefined,
): PolicyInForce[] {
  const rows: PolicyInForce[] = [];
  for (const p of policies?.policies ?? []) {
    const algorithm = algorithmOf(p.algorithm);
    rows.push({
      name: p.name,
      source: 'sluice',
      algorithm: p.algorithm,
      limit: `capacity ${algorithm.capacity(p.params)}, full after ${duration(algorithm.ttlMs(p.params))} idle`,
      failureMode: p.failureMode,
      shadow: p.shadow,
    });
  }
  for (const [domain, d] of Object.entries(envoy.domains)) {
    const walk = (level: EnvoyDescriptorLevel): void => {
      for (const node of Object.values(level.nodes)) {
        const rule = node.rule;
        if (rule !== undefined) {
          rows.push({
            name: publicRuleName(rule),
            source: 'envoy',
            domain,
            algorithm: rule.unlimited
              ? 'unlimited'
              : rule.requestsPerUnit === 0
                ? 'deny-all'
                : rule.sluice.algorithm,
            limit: rule.unlimited ? 'none' : `${rule.requestsPerUnit} per ${rule.unit ?? 'second'}`,
            ...(rule.sluice.failureMode === undefined
              ? {}
              : { failureMode: rule.sluice.failureMode }),
            shadow: rule.shadowMode,
          });
        }
        walk(node.children);
      }
    };
    walk(d.descriptors);
  }
  return rows;
}
