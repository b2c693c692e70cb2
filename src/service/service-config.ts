import { join } from 'node:path';
import type { EnvoyConfig } from '../config/envoy/envoy-config.js';
import { loadEnvoyConfigDir, loadEnvoyConfigPath } from '../config/envoy/load.js';
import { envoyRuntimeSettingsFromEnv } from '../config/envoy/runtime-dir.js';
import { loadPolicyFile } from '../config/load.js';
import type { PolicySet } from '../config/policies.js';

/** Where the service's rules come from. */
export interface ConfigSources {
  /**
   * envoyproxy/ratelimit YAML: a file, or a directory whose `.yaml`/`.yml` files are read
   * (sorted). Absent: upstream's runtime directory from `RUNTIME_ROOT` /
   * `RUNTIME_SUBDIRECTORY` / `RUNTIME_APPDIRECTORY`.
   */
  readonly envoyConfig?: string;
  /** Sluice-native policy file (YAML/JSON), for `/v1/check` and `sluice.v1`. */
  readonly policiesFile?: string;
  /** `MERGE_DOMAIN_CONFIG`. @default false */
  readonly mergeDomainConfig?: boolean;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export interface LoadedConfig {
  readonly envoy: EnvoyConfig;
  readonly policies: PolicySet | undefined;
  /** Files to watch for reloads. */
  readonly watch: readonly string[];
}

/** Loads and validates everything; throws `PolicyError` naming the file and problem. */
export async function loadServiceConfig(sources: ConfigSources): Promise<LoadedConfig> {
  const merge = sources.mergeDomainConfig ?? false;
  let envoy: EnvoyConfig;
  const watch: string[] = [];
  if (sources.envoyConfig !== undefined) {
    const path = sources.envoyConfig;
    envoy = await loadEnvoyConfigPath(path, { mergeDomainConfig: merge });
    watch.push(path);
  } else {
    const settings = envoyRuntimeSettingsFromEnv(sources.env ?? process.env);
    envoy = (await loadEnvoyConfigDir(settings)).config;
    if (settings.runtimeSubdirectory !== '')
      watch.push(join(settings.runtimeRoot, settings.runtimeSubdirectory));
  }
  const policies =
    sources.policiesFile === undefined ? undefined : await loadPolicyFile(sources.policiesFile);
  if (sources.policiesFile !== undefined) watch.push(sources.policiesFile);
  return { envoy, policies, watch };
}
