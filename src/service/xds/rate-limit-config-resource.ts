import { buildEnvoyConfig, type EnvoyConfigDocument } from '../../config/envoy/build.js';
import type { EnvoyYamlDescriptor, EnvoyYamlRoot } from '../../config/envoy/decode.js';
import type { EnvoyConfig } from '../../config/envoy/envoy-config.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../../core/errors.js';
import {
  RATE_LIMIT_CONFIG,
  RATE_LIMIT_CONFIG_TYPE_URL,
  type WireAny,
  type WireRateLimitConfig,
  type WireRateLimitDescriptor,
} from './xds-protos.js';

/** A decoded `google.protobuf.Value` (oneofs named in `kind`) as plain data. */
function plainValue(v: unknown): unknown {
  const value = v as Record<string, unknown> & { kind?: string };
  switch (value.kind) {
    case 'nullValue':
      return null;
    case 'structValue':
      return plainStruct(value['structValue'] as { fields: Record<string, unknown> });
    case 'listValue':
      return ((value['listValue'] as { values?: unknown[] }).values ?? []).map(plainValue);
    case undefined:
      return null;
    default:
      return value[value.kind];
  }
}

function plainStruct(s: { fields: Record<string, unknown> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s.fields).map(([k, v]) => [k, plainValue(v)]));
}

/** One descriptor in the shape the YAML loader produces (upstream: `rateLimitDescriptorsPbToYaml`). */
function descriptor(d: WireRateLimitDescriptor, path: string): EnvoyYamlDescriptor {
  const r = d.rateLimit;
  return {
    key: d.key,
    value: d.value,
    ...(r === null
      ? {}
      : {
          rateLimit: {
            requestsPerUnit: r.requestsPerUnit,
            unit: String(r.unit),
            unlimited: r.unlimited,
            name: r.name,
            replaces: r.replaces.map((x) => x.name),
          },
        }),
    descriptors: d.descriptors.map((c, i) => descriptor(c, `${path}.descriptors[${i}]`)),
    shadowMode: d.shadowMode,
    quotaMode: d.quotaMode,
    detailedMetric: d.detailedMetric,
    // The proto has neither field; upstream's conversion leaves them false.
    valueToMetric: false,
    shareThreshold: false,
    ...(d.metadata === null ? {} : { metadata: plainStruct(d.metadata) }),
    path,
  };
}

/** One RateLimitConfig resource as a config document named after the resource. */
export function rateLimitConfigDocument(config: WireRateLimitConfig): EnvoyConfigDocument {
  const root: EnvoyYamlRoot = {
    domain: config.domain,
    descriptors: config.descriptors.map((d, i) => descriptor(d, `descriptors[${i}]`)),
  };
  return { name: config.name, root, warnings: [] };
}

/**
 * Builds the service's config from the resources of one xDS response, every resource a
 * `RateLimitConfig` validated as upstream validates YAML files (same messages, each
 * prefixed by the resource's name). Throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`)
 * listing every issue; its message is what the NACK carries.
 */
export function configFromResources(
  resources: readonly WireAny[],
  options: { readonly mergeDomainConfig: boolean },
): EnvoyConfig {
  const issues: PolicyIssue[] = [];
  const docs: EnvoyConfigDocument[] = [];
  resources.forEach((any, i) => {
    const where = `resources[${i}]`;
    if (any.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
      issues.push({
        path: where,
        message: `type ${JSON.stringify(any.type_url)} is not ${RATE_LIMIT_CONFIG_TYPE_URL}`,
      });
      return;
    }
    try {
      docs.push(rateLimitConfigDocument(RATE_LIMIT_CONFIG.deserialize(any.value)));
    } catch (e) {
      issues.push({
        path: where,
        message: `cannot decode RateLimitConfig: ${e instanceof Error ? e.message : String(e)}`,
      });
    }
  });
  const built = buildEnvoyConfig(docs, options);
  issues.push(...built.issues);
  if (issues.length > 0) {
    throw new PolicyError('SLUICE_ERR_CONFIG_INVALID', issues.map(formatIssue).join('\n'), {
      issues,
    });
  }
  return built.config;
}
