import { readdir, stat } from 'node:fs/promises';
import { basename, join, relative, sep } from 'node:path';
import { PolicyError, type PolicyIssue } from '../../core/errors.js';
import { goBool } from '../env-values.js';

/**
 * Where envoyproxy/ratelimit finds its config files, from the same environment
 * variables (src/settings/settings.go) and with the same defaults.
 */
export interface EnvoyRuntimeSettings {
  /** `RUNTIME_ROOT`. @default "/srv/runtime_data/current" */
  readonly runtimeRoot: string;
  /** `RUNTIME_SUBDIRECTORY`; empty means no config is loaded at all. @default "" */
  readonly runtimeSubdirectory: string;
  /** `RUNTIME_APPDIRECTORY`. @default "config" */
  readonly runtimeAppDirectory: string;
  /**
   * `RUNTIME_WATCH_ROOT`: whether the root (a symlink swapped on deploy) is what
   * changes; it also changes which files are read, see {@link listEnvoyConfigFiles}.
   * @default true
   */
  readonly runtimeWatchRoot: boolean;
  /** `RUNTIME_IGNOREDOTFILES`: skip files and directories whose name starts with `.`. @default false */
  readonly runtimeIgnoreDotFiles: boolean;
  /** `MERGE_DOMAIN_CONFIG`: let several files configure one domain. @default false */
  readonly mergeDomainConfig: boolean;
}

/** Upstream's defaults. */
export const ENVOY_RUNTIME_DEFAULTS: EnvoyRuntimeSettings = Object.freeze({
  runtimeRoot: '/srv/runtime_data/current',
  runtimeSubdirectory: '',
  runtimeAppDirectory: 'config',
  runtimeWatchRoot: true,
  runtimeIgnoreDotFiles: false,
  mergeDomainConfig: false,
});

/**
 * Reads {@link EnvoyRuntimeSettings} from environment variables. An unset variable
 * takes the default; a set one is used as is (an empty `RUNTIME_APPDIRECTORY` is
 * empty, as upstream). Booleans are read as upstream reads them ({@link goBool});
 * anything else throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`) naming the variable,
 * where upstream refuses to start.
 */
export function envoyRuntimeSettingsFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): EnvoyRuntimeSettings {
  const issues: PolicyIssue[] = [];
  const text = (name: string, fallback: string): string => env[name] ?? fallback;
  const bool = (name: string, fallback: boolean): boolean => {
    const v = env[name];
    if (v === undefined) return fallback;
    const read = goBool.safeParse(v);
    if (read.success) return read.data;
    issues.push(...read.error.issues.map((i) => ({ path: name, message: i.message })));
    return fallback;
  };
  const d = ENVOY_RUNTIME_DEFAULTS;
  const settings: EnvoyRuntimeSettings = {
    runtimeRoot: text('RUNTIME_ROOT', d.runtimeRoot),
    runtimeSubdirectory: text('RUNTIME_SUBDIRECTORY', d.runtimeSubdirectory),
    runtimeAppDirectory: text('RUNTIME_APPDIRECTORY', d.runtimeAppDirectory),
    runtimeWatchRoot: bool('RUNTIME_WATCH_ROOT', d.runtimeWatchRoot),
    runtimeIgnoreDotFiles: bool('RUNTIME_IGNOREDOTFILES', d.runtimeIgnoreDotFiles),
    mergeDomainConfig: bool('MERGE_DOMAIN_CONFIG', d.mergeDomainConfig),
  };
  if (issues.length > 0) {
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      issues.map((i) => `${i.path}: ${i.message}`).join('\n'),
      { issues },
    );
  }
  return Object.freeze(settings);
}

/** Go's `filepath.Join`: empty elements are dropped; no elements give ''. */
function goJoin(...parts: string[]): string {
  const kept = parts.filter((p) => p !== '');
  return kept.length === 0 ? '' : join(...kept);
}

/** One config file found in the runtime directory. */
export interface EnvoyRuntimeFile {
  /** Path on disk. */
  readonly path: string;
  /**
   * Upstream's runtime key: the path relative to the walked directory with `/` turned
   * into `.`, extension kept (`config.ratelimit.yaml`). Upstream names files by it.
   */
  readonly key: string;
}

/** The directory walked and the key filter, or why nothing is read. */
function walkPlan(s: EnvoyRuntimeSettings): { base: string; prefix: string } | { none: string } {
  if (s.runtimeWatchRoot) {
    if (s.runtimeRoot === '' || s.runtimeSubdirectory === '') {
      return { none: 'RUNTIME_ROOT or RUNTIME_SUBDIRECTORY is empty: no config is loaded' };
    }
    return {
      base: goJoin(s.runtimeRoot, s.runtimeSubdirectory),
      prefix: `${s.runtimeAppDirectory}.`,
    };
  }
  const runtimePath = goJoin(s.runtimeRoot, s.runtimeSubdirectory);
  if (runtimePath === '' || s.runtimeAppDirectory === '') {
    return {
      none: 'RUNTIME_ROOT/RUNTIME_SUBDIRECTORY or RUNTIME_APPDIRECTORY is empty: no config is loaded',
    };
  }
  return { base: goJoin(runtimePath, s.runtimeAppDirectory), prefix: '' };
}

/** An fs error's code (`ENOENT`), else its message. */
export const codeOf = (e: unknown): string =>
  (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));

/**
 * Lists the files upstream reads, as its runtime loader (lyft/goruntime) does:
 *
 * - `RUNTIME_WATCH_ROOT=true` (default): walk `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`
 *   recursively and keep files whose runtime key starts with `RUNTIME_APPDIRECTORY.`
 *   (so `config/a.yaml`, `config/team/b.yaml`, but also a file named `config.x`);
 * - `RUNTIME_WATCH_ROOT=false`: walk `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`
 *   recursively and keep every file.
 *
 * Every regular file is read, whatever its extension (upstream's README says `*.yaml`;
 * its loader reads everything). Dot files and dot directories are skipped only with
 * `RUNTIME_IGNOREDOTFILES`. Unreadable entries (a symlink to a directory, a missing
 * directory) are skipped with a warning, as upstream logs and skips them. Files are
 * returned sorted by runtime key (upstream's order is random). `dirs` lists the
 * directories walked (the base first), `base` the directory the walk starts from: the
 * places whose changes make another walk read something else.
 */
export async function listEnvoyConfigFiles(settings: EnvoyRuntimeSettings): Promise<{
  files: EnvoyRuntimeFile[];
  warnings: PolicyIssue[];
  dirs: string[];
  base?: string;
}> {
  const warnings: PolicyIssue[] = [];
  const plan = walkPlan(settings);
  if ('none' in plan) {
    warnings.push({ path: '', message: plan.none });
    return { files: [], warnings, dirs: [] };
  }
  const { base, prefix } = plan;
  const skipDot = (name: string): boolean => settings.runtimeIgnoreDotFiles && name.startsWith('.');
  const files: EnvoyRuntimeFile[] = [];
  const dirs: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      warnings.push({ file: dir, path: '', message: `runtime: error processing: ${codeOf(e)}` });
      return;
    }
    dirs.push(dir);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (skipDot(entry.name)) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(path);
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        const key = relative(base, path).split(sep).join('.');
        if (key.startsWith(prefix)) files.push({ path, key });
      } else {
        warnings.push({ file: path, path: '', message: 'runtime: not a regular file; skipped' });
      }
    }
  };
  try {
    const info = await stat(base);
    if (!info.isDirectory()) {
      warnings.push({
        file: base,
        path: '',
        message: 'runtime: not a directory; no config is loaded',
      });
    } else if (!skipDot(basename(base))) {
      await walk(base);
    }
  } catch (e) {
    warnings.push({ file: base, path: '', message: `runtime: error processing: ${codeOf(e)}` });
  }
  files.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { files, warnings, dirs, base };
}
