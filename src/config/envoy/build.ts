import type { PolicyIssue } from '../../core/errors.js';
import type { EnvoyYamlDescriptor, EnvoyYamlRoot } from './decode.js';
import type { GoNode } from './yaml-tree.js';
import {
  parseEnvoyUnit,
  type DecisionMode,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
  type EnvoyDescriptorNode,
  type EnvoyDomain,
  type EnvoyRule,
  type EnvoyWildcard,
} from './envoy-config.js';
import {
  parseSluiceDomainExtension,
  parseSluiceExtension,
  sluiceRuleOptions,
  type Problem,
} from './sluice-extension.js';
import { splitWildcard } from './wildcard.js';

/** One parsed file, ready to be built into a config. */
export interface EnvoyConfigDocument {
  /** The name issues use for this file (a path, or upstream's runtime key). */
  readonly name: string;
  readonly root: EnvoyYamlRoot;
  readonly warnings: readonly PolicyIssue[];
}

/** A domain under construction: its `decision` and the file that set it. */
interface DomainBuilder {
  readonly level: LevelBuilder;
  readonly files: string[];
  decision?: { readonly mode: DecisionMode; readonly file: string };
}

/** A level under construction. */
interface LevelBuilder {
  readonly nodes: Record<string, EnvoyDescriptorNode>;
  readonly wildcards: EnvoyWildcard[];
}

const newLevel = (): LevelBuilder => ({
  nodes: Object.create(null) as Record<string, EnvoyDescriptorNode>,
  wildcards: [],
});

class Builder {
  readonly domains: Record<string, DomainBuilder> = Object.create(null) as Record<
    string,
    DomainBuilder
  >;
  readonly issues: PolicyIssue[] = [];
  readonly warnings: PolicyIssue[] = [];

  constructor(private readonly merge: boolean) {}

  private issue(file: string, message: string, path = ''): void {
    this.issues.push({ file, path, message });
  }

  /** One file into the config (upstream: `loadConfig`). */
  loadFile(doc: EnvoyConfigDocument): void {
    const { name: file, root } = doc;
    this.warnings.push(...doc.warnings);
    if (root.domain === '') {
      this.issue(file, 'config file cannot have empty domain');
      return;
    }
    let domain = this.domains[root.domain];
    if (domain !== undefined && !this.merge) {
      this.issue(file, `duplicate domain '${root.domain}' in config file`);
      return;
    }
    if (domain === undefined) {
      domain = { level: newLevel(), files: [] };
      this.domains[root.domain] = domain;
    }
    domain.files.push(file);
    if (root.sluice !== undefined) this.loadDomainSettings(domain, file, root.sluice);
    this.loadLevel(domain.level, file, `${root.domain}.`, root.descriptors);
  }

  /** A top-level `sluice:` block into its domain (files merged into one domain must agree). */
  private loadDomainSettings(domain: DomainBuilder, file: string, node: GoNode): void {
    const problems: Problem[] = [];
    const ext = parseSluiceDomainExtension(node, 'sluice', problems);
    const mode = ext.decision;
    const earlier = domain.decision;
    if (mode !== undefined && earlier !== undefined && earlier.mode !== mode) {
      problems.push([
        'sluice.decision',
        `"${mode}" conflicts with "${earlier.mode}" set for the same domain in ${earlier.file}`,
      ]);
    } else if (mode !== undefined) domain.decision = { mode, file };
    this.addProblems(file, problems);
  }

  /** A descriptor list into a level (upstream: `loadDescriptors`), in file order. */
  private loadLevel(
    level: LevelBuilder,
    file: string,
    parentKey: string,
    descriptors: readonly EnvoyYamlDescriptor[],
  ): void {
    for (const d of descriptors) {
      if (d.key === '') {
        this.issue(file, 'descriptor has empty key');
        continue;
      }
      const compositeKey = d.value === '' ? d.key : `${d.key}_${d.value}`;
      const fullKey = parentKey + compositeKey;
      if (level.nodes[compositeKey] !== undefined) {
        this.issue(file, `duplicate descriptor composite key '${fullKey}'`);
        continue;
      }
      const rule = this.loadRule(d, file, fullKey);
      if (d.shareThreshold && !compositeKey.includes('*')) {
        this.issue(
          file,
          `share_threshold can only be used with wildcard values (containing '*'), but found key '${compositeKey}'`,
        );
      }
      if (compositeKey.includes('*')) {
        level.wildcards.push({ compositeKey, parts: splitWildcard(compositeKey) });
      }
      const children = newLevel();
      this.loadLevel(children, file, `${fullKey}.`, d.descriptors);
      level.nodes[compositeKey] = {
        key: d.key,
        ...(d.value === '' ? {} : { value: d.value }),
        compositeKey,
        fullKey,
        ...(rule === undefined ? {} : { rule }),
        valueToMetric: d.valueToMetric,
        shareThreshold: d.shareThreshold,
        children,
        file,
        path: d.path,
      };
    }
  }

  private loadRule(d: EnvoyYamlDescriptor, file: string, fullKey: string): EnvoyRule | undefined {
    const problems: Problem[] = [];
    const ext =
      d.sluice === undefined ? {} : parseSluiceExtension(d.sluice, `${d.path}.sluice`, problems);
    const rl = d.rateLimit;
    if (rl === undefined) {
      for (const [flag, on] of [
        ['shadow_mode', d.shadowMode],
        ['quota_mode', d.quotaMode],
        ['detailed_metric', d.detailedMetric],
      ] as const) {
        if (on) {
          this.warnings.push({
            file,
            path: d.path,
            message: `${flag} has no effect without a rate_limit on the same descriptor`,
          });
        }
      }
      if (d.sluice !== undefined) {
        problems.push([`${d.path}.sluice`, 'needs a rate_limit on the same descriptor']);
      }
      this.addProblems(file, problems);
      return undefined;
    }
    const unit = parseEnvoyUnit(rl.unit);
    if (rl.unlimited) {
      if (unit !== undefined) this.issue(file, 'should not specify rate limit unit when unlimited');
    } else if (unit === undefined) {
      this.issue(file, `invalid rate limit unit '${rl.unit}'`);
    }
    for (const replaced of rl.replaces) {
      if (replaced === '') this.issue(file, 'should not have an empty replaces entry');
      else if (replaced === rl.name) {
        this.issue(file, 'replaces should not contain name of same descriptor');
      }
    }
    const basis = {
      requestsPerUnit: rl.requestsPerUnit,
      unlimited: rl.unlimited,
      ...(rl.unlimited || unit === undefined ? {} : { unit }),
    };
    const sluice = sluiceRuleOptions(ext, basis, `${d.path}.sluice`, problems);
    this.addProblems(file, problems);
    return {
      requestsPerUnit: rl.requestsPerUnit,
      ...(basis.unit === undefined ? {} : { unit: basis.unit }),
      unlimited: rl.unlimited,
      name: rl.name,
      replaces: [...rl.replaces],
      shadowMode: d.shadowMode,
      quotaMode: d.quotaMode,
      detailedMetric: d.detailedMetric,
      fullKey,
      ...(d.metadata === undefined ? {} : { metadata: d.metadata }),
      sluice,
    };
  }

  private addProblems(file: string, problems: readonly Problem[]): void {
    for (const [path, message] of problems) this.issues.push({ file, path, message });
  }
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/**
 * Builds a config from parsed files in order (upstream: `NewRateLimitConfigImpl`).
 * Each domain must appear in one file unless `mergeDomainConfig` is set; then later
 * files add top-level descriptors to the domain, and a composite key already present
 * is still a duplicate (there is no deep merge). Returns every issue found; the config
 * is only meaningful when there are none.
 */
export function buildEnvoyConfig(
  docs: readonly EnvoyConfigDocument[],
  options: { readonly mergeDomainConfig: boolean },
): { config: EnvoyConfig; issues: readonly PolicyIssue[] } {
  const b = new Builder(options.mergeDomainConfig);
  for (const doc of docs) b.loadFile(doc);
  const domains = Object.create(null) as Record<string, EnvoyDomain>;
  for (const [name, d] of Object.entries(b.domains)) {
    const descriptors: EnvoyDescriptorLevel = d.level;
    domains[name] = {
      domain: name,
      descriptors,
      files: d.files,
      ...(d.decision === undefined ? {} : { decision: d.decision.mode }),
    };
  }
  return { config: deepFreeze({ domains, warnings: b.warnings }), issues: b.issues };
}
