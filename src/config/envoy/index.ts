/**
 * envoyproxy/ratelimit's YAML configuration and descriptor matching, as a pure module
 * (plus the runtime-directory loader). See docs/envoy-config.md.
 */
export {
  DECISION_MODES,
  ENVOY_UNITS,
  ENVOY_UNIT_NUMBERS,
  parseEnvoyUnit,
  publicRuleName,
  unitToMs,
  unitToSeconds,
  type DecisionMode,
  type EnvoyConfig,
  type EnvoyDescriptorLevel,
  type EnvoyDescriptorNode,
  type EnvoyDomain,
  type EnvoyRule,
  type EnvoyUnit,
  type EnvoyWildcard,
  type SluiceRuleOptions,
} from './envoy-config.js';
export {
  formatEnvoyConfigError,
  loadEnvoyConfigDir,
  loadEnvoyConfigFiles,
  loadEnvoyConfigPath,
  parseEnvoyConfigYaml,
  type EnvoyConfigSource,
  type EnvoyDirOptions,
  type EnvoyLoadOptions,
  type EnvoyPathOptions,
} from './load.js';
export { buildEnvoyConfig, type EnvoyConfigDocument } from './build.js';
export type { EnvoyYamlDescriptor, EnvoyYamlRateLimit, EnvoyYamlRoot } from './decode.js';
export {
  ENVOY_RUNTIME_DEFAULTS,
  envoyRuntimeSettingsFromEnv,
  listEnvoyConfigFiles,
  type EnvoyRuntimeFile,
  type EnvoyRuntimeSettings,
} from './runtime-dir.js';
export { findRule, type EnvoyEntry, type MatchVia, type RuleMatch } from './match.js';
export { matchWildcard, splitWildcard } from './wildcard.js';
export {
  descriptorKey,
  resolveDescriptorLimit,
  type EnvoyLimitOverride,
  type ResolvedLimit,
} from './limit-override.js';
export { replacedMask, type ReplaceableRule } from './replaces.js';
export { hitsAddends } from './hits-addend.js';
export {
  UNLIMITED_REMAINING,
  descriptorCode,
  overallResult,
  type DescriptorOutcome,
  type EnvoyCode,
  type OverallOptions,
  type OverallResult,
} from './overall.js';
export { durationUntilResetMs, durationUntilResetSeconds, windowStartMs } from './window.js';
export { envoyCacheKey } from './cache-key.js';
export { SLUICE_FIELDS, ruleParams } from './sluice-extension.js';
