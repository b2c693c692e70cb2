import type { EnvoyConfig } from '../config/envoy/envoy-config.js';
import { loadEnvoyConfigDir, loadEnvoyConfigPath } from '../config/envoy/load.js';
import { envoyRuntimeSettingsFromEnv } from '../config/envoy/runtime-dir.js';
import { loadPolicyFile } from '../config/load.js';
import type { PolicySet } from '../config/policies.js';
import type { WatchedPath } from './config-watcher.js';

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
  /**
   * The envoy rules come from an xDS server: no file is read for them and the loaded
   * envoy config is empty. @default false
   */
  readonly envoyFromXds?: boolean;
}

export interface LoadedConfig {
  readonly envoy: EnvoyConfig;
  readonly policies: PolicySet | undefined;
  /**
   * What to watch for reloads: every file read, the directories listed, and (runtime
   * layout) `RUNTIME_ROOT`, whose swap upstream watches for.
   */
  readonly watch: readonly WatchedPath[];
}

const EMPTY_ENVOY_CONFIG: EnvoyConfig = Object.freeze({
  domains: Object.freeze(Object.create(null) as Record<string, never>),
  warnings: Object.freeze([]),
});

/** Loads and validates everything; throws `PolicyError` naming the file and problem. */
export async function loadServiceConfig(sources: ConfigSources): Promise<LoadedConfig> {
  const merge = sources.mergeDomainConfig ?? false;
  let envoy: EnvoyConfig;
  const watch: WatchedPath[] = [];
  if (sources.envoyFromXds === true) {
    envoy = EMPTY_ENVOY_CONFIG;
  } else if (sources.envoyConfig !== undefined) {
    const path = sources.envoyConfig;
    envoy = await loadEnvoyConfigPath(path, {
      mergeDomainConfig: merge,
      onDirectory: (dir) => watch.push({ path: dir, entries: true }),
      onFile: (file) => watch.push({ path: file, entries: false }),
    });
  } else {
    const settings = envoyRuntimeSettingsFromEnv(sources.env ?? process.env);
    const loaded = await loadEnvoyConfigDir(settings);
    envoy = loaded.config;
    if (loaded.base !== undefined) {
      watch.push({ path: settings.runtimeRoot, entries: false });
      watch.push({ path: loaded.base, entries: true });
      for (const dir of loaded.dirs) watch.push({ path: dir, entries: true });
      for (const file of loaded.files) watch.push({ path: file.path, entries: false });
    }
  }
  const policies =
    sources.policiesFile === undefined ? undefined : await loadPolicyFile(sources.policiesFile);
  if (sources.policiesFile !== undefined)
    watch.push({ path: sources.policiesFile, entries: false });
  return { envoy, policies, watch };
}
