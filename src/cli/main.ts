#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { errorText, exitCodeOf } from './error-text.js';
import { addCheckCommand } from './check-command.js';
import { addServeCommand } from './serve-command.js';
import { addPlanCommand } from './plan-command.js';
import { addExplainCommand } from './explain-command.js';
import { addValidateCommand } from './validate-command.js';
import { addSimulateCommand } from './simulate-command.js';

// Each command imports its heavy modules (the service, gRPC, the limiter, the loaders)
// inside its action, so that `sluice --version` or a bad flag costs little more than
// starting node.

function fail(error: unknown): never {
  process.stderr.write(errorText(error));
  process.exit(exitCodeOf(error));
}

// dist/cli/main.js (and src/cli/main.ts) sit two levels under the package root.
const { version } = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as { version: string };

const program = new Command()
  .name('sluice')
  .description('Sluice: a distributed rate limiter. See docs/ for the full guide.')
  .version(version, '-V, --version', 'print the version')
  .showHelpAfterError();

// Upstream's config_check flags are Go-style (`-config_dir DIR`, `-config_dir=DIR`);
// accept them as spellings of the long options of `validate`.
const GO_FLAGS: Readonly<Record<string, string>> = {
  config_dir: '--config-dir',
  merge_domain_configs: '--merge-domain-configs',
};
const argv = process.argv.map((a) => {
  const m = /^--?(config_dir|merge_domain_configs)(=.*)?$/.exec(a);
  return m ? `${GO_FLAGS[m[1]!]}${m[2] ?? ''}` : a;
});

addCheckCommand(program, fail);
addServeCommand(program, fail);
addPlanCommand(program, fail);
addExplainCommand(program, fail);
addValidateCommand(program, fail);
addSimulateCommand(program, fail);

// The controller command's module imports the quota controller and gRPC at its top
// (about half a second), so it is loaded only when the controller may be run or listed:
// any first argument but another command's name or --version (help, a typo that
// commander answers with "did you mean controller?", or `controller` itself).
const first = argv[2];
const others = new Set(['-V', '--version', ...program.commands.map((c) => c.name())]);
if (first === undefined || !others.has(first)) {
  const { addControllerCommand } = await import('./controller-command.js');
  addControllerCommand(program, fail);
}

await program.parseAsync(argv);
