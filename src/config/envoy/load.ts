import { readFile } from 'node:fs/promises';
import { PolicyError, formatIssue, type PolicyIssue } from '../../core/errors.js';
import { EMPTY_FILE, listConfigPath, readConfigFile } from '../read-file.js';
import { buildEnvoyConfig, type EnvoyConfigDocument } from './build.js';
import { decodeRoot, unmarshalError } from './decode.js';
import type { EnvoyConfig } from './envoy-config.js';
import {
  codeOf,
  listEnvoyConfigFiles,
  type EnvoyRuntimeFile,
  type EnvoyRuntimeSettings,
} from './runtime-dir.js';
import { validateKeys } from './validate-keys.js';
import { invalidMapKey, parseGoYaml, type GoNode } from './yaml-tree.js';

const isNull = (n: GoNode): boolean => n.kind === 'scalar' && n.typed.kind === 'nil';

/** One config file: the name to report it by, and its text. */
export interface EnvoyConfigSource {
  readonly name: string;
  readonly text: string;
}

/** Options of {@link loadEnvoyConfigFiles}. */
export interface EnvoyLoadOptions {
  /**
   * Let several files configure the same domain (upstream `MERGE_DOMAIN_CONFIG`).
   * @default false
   */
  readonly mergeDomainConfig: boolean;
}

/** Why one file could not be read, and whether it was plain YAML syntax. */
interface FileFailure {
  readonly issues: PolicyIssue[];
  readonly syntax: boolean;
}

/** Prefix of every message about a file that upstream could not decode. */
const DECODE_PREFIX = 'error loading config file: ';

/** Reads one file like upstream's `ConfigFileContentToYaml`, collecting every issue. */
function readDocument(text: string, file: string): EnvoyConfigDocument | FileFailure {
  const fail = (message: string, syntax = false): FileFailure => ({
    issues: [{ file, path: '', message }],
    syntax,
  });
  const parsed = parseGoYaml(text);
  if (!parsed.ok)
    return fail(DECODE_PREFIX + parsed.message, parsed.message.startsWith('yaml: line'));
  const root = parsed.root;
  // Upstream reports an empty file as a file without a domain; say what it is.
  if (root === undefined) return fail(EMPTY_FILE);
  // Upstream first decodes into a generic map: anything else at the top is an error.
  if (root !== undefined && root.kind !== 'map' && !isNull(root)) {
    const error = unmarshalError(root, 'map[interface {}]interface {}');
    return fail(`${DECODE_PREFIX}yaml: unmarshal errors:\n  ${error}`);
  }
  const badKey = root === undefined ? undefined : invalidMapKey(root);
  if (badKey !== undefined) return fail(DECODE_PREFIX + badKey);
  const keyProblems = root === undefined ? [] : validateKeys(root);
  if (keyProblems.length > 0) {
    return { issues: keyProblems.map((message) => ({ file, path: '', message })), syntax: false };
  }
  const { root: decoded, notes } = decodeRoot(root);
  const issues: PolicyIssue[] = [];
  if (notes.typeErrors.length > 0) {
    issues.push({
      file,
      path: '',
      message: `${DECODE_PREFIX}yaml: unmarshal errors:\n  ${notes.typeErrors.join('\n  ')}`,
    });
  }
  for (const [path, message] of notes.problems) issues.push({ file, path, message });
  if (issues.length > 0) return { issues, syntax: false };
  const warnings: PolicyIssue[] = notes.warnings.map(([path, message]) => ({
    file,
    path,
    message,
  }));
  if (parsed.ignoredDocuments > 0) {
    warnings.push({
      file,
      path: '',
      message: `only the first YAML document is read; ${parsed.ignoredDocuments} more ignored`,
    });
  }
  return { name: file, root: decoded, warnings };
}

function throwIssues(issues: readonly PolicyIssue[], syntaxOnly: boolean): never {
  throw new PolicyError(
    syntaxOnly ? 'SLUICE_ERR_CONFIG_PARSE' : 'SLUICE_ERR_CONFIG_INVALID',
    issues.map(formatIssue).join('\n'),
    { issues },
  );
}

/**
 * Reads one envoyproxy/ratelimit YAML file (upstream's per-file step): YAML syntax,
 * upstream's key check, types, and the `sluice:` blocks' shape. Rules that need the
 * whole config (domains, duplicates, units, replaces) are checked by
 * {@link loadEnvoyConfigFiles}.
 *
 * Throws `PolicyError`: `SLUICE_ERR_CONFIG_PARSE` for YAML syntax, otherwise
 * `SLUICE_ERR_CONFIG_INVALID`; `issues` carry upstream's messages (e.g.
 * `config error, unknown key 'ratelimit'`) with `file` set to `fileName`.
 */
export function parseEnvoyConfigYaml(text: string, fileName: string): EnvoyConfigDocument {
  const doc = readDocument(text, fileName);
  if ('issues' in doc) throwIssues(doc.issues, doc.syntax);
  return doc;
}

/**
 * Loads envoyproxy/ratelimit config files, in the given order, into one validated,
 * deep-frozen config. Every file is checked and every issue reported at once, in file
 * order and, within a file, in document order; the first issue is the one upstream
 * would stop at (upstream stops at the first error it meets).
 *
 * Throws `PolicyError` (`SLUICE_ERR_CONFIG_INVALID`, or `SLUICE_ERR_CONFIG_PARSE` when
 * every issue is YAML syntax) whose message is one `file: message` line per issue.
 * No files give an empty config, as upstream.
 */
export function loadEnvoyConfigFiles(
  files: readonly EnvoyConfigSource[],
  options: EnvoyLoadOptions = { mergeDomainConfig: false },
): EnvoyConfig {
  const issues: PolicyIssue[] = [];
  let syntaxOnly = true;
  const docs: EnvoyConfigDocument[] = [];
  for (const f of files) {
    const doc = readDocument(f.text, f.name);
    if ('issues' in doc) {
      issues.push(...doc.issues);
      syntaxOnly &&= doc.syntax;
    } else {
      docs.push(doc);
    }
  }
  const built = buildEnvoyConfig(docs, options);
  if (built.issues.length > 0) syntaxOnly = false;
  issues.push(...built.issues);
  if (issues.length > 0) throwIssues(issues, syntaxOnly);
  return built.config;
}

/** Options of {@link loadEnvoyConfigPath}. */
export interface EnvoyPathOptions extends EnvoyLoadOptions {
  /** Called before a directory is listed (validate prints upstream's progress lines). */
  readonly onDirectory?: (path: string) => void;
  /** Called before each file is read. */
  readonly onFile?: (file: string) => void;
}

/**
 * Loads envoyproxy/ratelimit config from a file, or from a directory's `.yaml`/`.yml`
 * files in name order: what `sluice serve --config` and `sluice validate` read. Throws
 * `PolicyError`: `SLUICE_ERR_CONFIG_READ` naming each path that cannot be read and why,
 * else as {@link loadEnvoyConfigFiles}.
 */
export async function loadEnvoyConfigPath(
  path: string,
  options: EnvoyPathOptions = { mergeDomainConfig: false },
): Promise<EnvoyConfig> {
  const listing = await listConfigPath(path);
  if (listing.isDirectory) options.onDirectory?.(path);
  const sources: EnvoyConfigSource[] = [];
  const unreadable: PolicyIssue[] = [];
  for (const name of listing.files) {
    options.onFile?.(name);
    try {
      sources.push({ name, text: await readConfigFile(name) });
    } catch (e) {
      if (!(e instanceof PolicyError)) throw e;
      unreadable.push(...e.issues);
    }
  }
  if (unreadable.length > 0) {
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', unreadable.map(formatIssue).join('\n'), {
      issues: unreadable,
    });
  }
  return loadEnvoyConfigFiles(sources, { mergeDomainConfig: options.mergeDomainConfig });
}

/**
 * Formats a load failure like upstream's `config_check` tool prints it: one line
 * `error loading rate limit configs: <file>: <message>` per issue (upstream prints only
 * its first). Issues without a file, or errors that are not `PolicyError`, are printed
 * after the same prefix.
 */
export function formatEnvoyConfigError(error: unknown): string {
  const prefix = 'error loading rate limit configs: ';
  if (error instanceof PolicyError)
    return error.issues.map((i) => prefix + formatIssue(i)).join('\n');
  return prefix + (error instanceof Error ? error.message : String(error));
}

/** Options of {@link loadEnvoyConfigDir}. */
export interface EnvoyDirOptions {
  /**
   * How issues name a file: its `path`, or upstream's `runtime-key`
   * (`config.ratelimit.yaml`, what upstream's service logs). @default "path"
   */
  readonly nameBy?: 'path' | 'runtime-key';
}

/**
 * Loads the config upstream would load from its runtime directory (see
 * {@link listEnvoyConfigFiles} for which files), merging domains per
 * `settings.mergeDomainConfig`. An empty or missing directory gives an empty config
 * with a warning, as upstream starts with no domains. Throws `PolicyError` like
 * `loadEnvoyConfigFiles`.
 */
export async function loadEnvoyConfigDir(
  settings: EnvoyRuntimeSettings,
  options: EnvoyDirOptions = {},
): Promise<{
  config: EnvoyConfig;
  files: readonly EnvoyRuntimeFile[];
  /** The directories walked, and the walk's base: see {@link listEnvoyConfigFiles}. */
  dirs: readonly string[];
  base?: string;
}> {
  const { files, warnings, dirs, base } = await listEnvoyConfigFiles(settings);
  const sources: EnvoyConfigSource[] = [];
  const read: EnvoyRuntimeFile[] = [];
  for (const f of files) {
    try {
      const text = await readFile(f.path, 'utf8');
      sources.push({ name: options.nameBy === 'runtime-key' ? f.key : f.path, text });
      read.push(f);
    } catch (e) {
      warnings.push({ file: f.path, path: '', message: `runtime: error reading: ${codeOf(e)}` });
    }
  }
  const config = loadEnvoyConfigFiles(sources, { mergeDomainConfig: settings.mergeDomainConfig });
  const merged: EnvoyConfig = Object.freeze({
    domains: config.domains,
    warnings: Object.freeze([...warnings.map((w) => Object.freeze(w)), ...config.warnings]),
  });
  return {
    config: merged,
    files: Object.freeze(read),
    dirs: Object.freeze(dirs),
    ...(base === undefined ? {} : { base }),
  };
}
