import { readFile, stat } from 'node:fs/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { formatIssue } from '../core/errors.js';
import { fsProblem } from '../config/read-file.js';
import { exitCodeOf } from './error-text.js';

/** Which loader a file given to `validate` is meant for. */
type ConfigFormat = 'envoy' | 'sluice';

/**
 * Guesses a file's format from its top-level keys: `policies:` is a Sluice policy file,
 * `domain:` (without `policies:`) is envoyproxy/ratelimit YAML. Read line by line so a
 * file with a syntax error is still sent to the loader that reports it best.
 */
function detectFormat(text: string): ConfigFormat {
  const topKey = (key: string): boolean =>
    new RegExp(`^(["']?)${key}\\1[ \\t]*:`, 'm').test(text) ||
    new RegExp(`^\\s*\\{\\s*"${key}"\\s*:`).test(text);
  if (topKey('policies')) return 'sluice';
  return topKey('domain') ? 'envoy' : 'sluice';
}

/**
 * Validates envoyproxy/ratelimit config like upstream's `config_check` tool: the same
 * progress lines on stdout and `all rate limit configs ok`, or one
 * `error loading rate limit configs: <file>: <message>` line per issue on stderr and
 * exit 1. A directory's `.yaml`/`.yml` files are read in name order, as `serve --config`
 * reads them.
 */
async function validateEnvoy(path: string, merge: boolean): Promise<void> {
  const out = (line: string): boolean => process.stdout.write(`${line}\n`);
  out('checking rate limit configs...');
  const { formatEnvoyConfigError, loadEnvoyConfigPath } = await import('../config/envoy/index.js');
  try {
    const config = await loadEnvoyConfigPath(path, {
      mergeDomainConfig: merge,
      onDirectory: (dir) => out(`loading config directory: ${dir}`),
      onFile: (file) => out(`opening config file: ${file}`),
    });
    for (const w of config.warnings) process.stderr.write(`warning: ${formatIssue(w)}\n`);
  } catch (error) {
    process.stderr.write(`${formatEnvoyConfigError(error)}\n`);
    process.exit(exitCodeOf(error));
  }
  out('all rate limit configs ok');
}

// Upstream's config_check flags are Go-style (`-config_dir DIR`, `-config_dir=DIR`);

/**
 * `sluice validate`: a Sluice policy file or envoyproxy/ratelimit config. The loaders
 * are imported inside the action, so that other commands do not pay for loading them.
 */
export function addValidateCommand(program: Command, fail: (error: unknown) => never): void {
  const env = process.env;
  program
    .command('validate')
    .description(
      'Validate a Sluice policy file, or envoyproxy/ratelimit config (a directory, or a file with a top-level domain:); print every problem and exit 1 when there is one',
    )
    .argument(
      '[path]',
      'policy file (YAML or JSON), or envoyproxy/ratelimit YAML file or directory',
    )
    .option('--config-dir <dir>', 'envoyproxy/ratelimit config directory (upstream -config_dir)')
    .option(
      '--merge-domain-configs',
      'let several files configure one domain (upstream -merge_domain_configs; env MERGE_DOMAIN_CONFIG)',
    )
    .addOption(
      new Option('--format <format>', 'skip detection: envoy or sluice').choices([
        'envoy',
        'sluice',
      ]),
    )
    .action(
      async (
        arg: string | undefined,
        o: { configDir?: string; mergeDomainConfigs?: boolean; format?: ConfigFormat },
      ) => {
        try {
          if (arg !== undefined && o.configDir !== undefined)
            throw new InvalidArgumentError('give a path or --config-dir, not both');
          const path = arg ?? o.configDir;
          if (path === undefined) throw new InvalidArgumentError('missing path to validate');
          const merge =
            o.mergeDomainConfigs ??
            (await import('../service/env-settings.js')).readSetting('mergeDomainConfig', env);
          let isDir = false;
          let statError: unknown;
          try {
            isDir = (await stat(path)).isDirectory();
          } catch (e) {
            statError = e; // the loader reports it, naming the path and the problem
          }
          let format = o.format;
          if (o.configDir !== undefined || isDir) format ??= 'envoy';
          if (format === undefined) {
            let text = '';
            try {
              text = await readFile(path, 'utf8');
            } catch {
              // The Sluice loader reports the read error with its code.
            }
            format = detectFormat(text);
          }
          if (format === 'envoy') {
            if (o.configDir !== undefined && !isDir) {
              const problem = statError === undefined ? 'not a directory' : fsProblem(statError);
              process.stderr.write(`error opening directory ${path}: ${problem}\n`);
              process.exit(1);
            }
            await validateEnvoy(path, merge);
            return;
          }
          const { loadPolicyFile } = await import('../config/load.js');
          const set = await loadPolicyFile(path);
          process.stdout.write(
            `${path}: ok (${set.policies.length} ${set.policies.length === 1 ? 'policy' : 'policies'})\n`,
          );
        } catch (error) {
          if (error instanceof InvalidArgumentError) {
            process.stderr.write(`sluice: ${error.message}\n`);
            process.exit(2);
          }
          fail(error);
        }
      },
    );
}
