/**
 * What the commands say about a bad config file, spawned as a user runs them: one file
 * gives one message whichever command reads it, every problem is listed, file system
 * failures name the path and the problem, and `--version` works. Needs `npm run build`.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fsProblem } from '../../src/config/read-file.js';
import { root, runSluice, SERVE_ENV, type Outcome } from './run-sluice.js';

const INVALID = '[SLUICE_ERR_CONFIG_INVALID]';
const READ = '[SLUICE_ERR_CONFIG_READ]';
const ENVOY_GIVEN =
  'this is envoyproxy/ratelimit config (it has a top-level "domain"), not a Sluice policy file; ' +
  'give it to "sluice serve --config" (or check it with "sluice validate")';

const failed = (stderr: string): Omit<Outcome, 'stdout'> => ({ code: 1, stderr, served: false });

/** Every command that reads `file` as a config: validate, serve (both roles), check. */
async function everyReader(file: string): Promise<Record<string, Outcome>> {
  const env = { ...SERVE_ENV };
  return {
    validate: await runSluice(['validate', file]),
    'serve --config': await runSluice(['serve', '--config', file], { env }),
    'serve --policies': await runSluice(
      ['serve', '--config', 'examples/envoy', '--policies', file],
      { env },
    ),
    'check -c': await runSluice(['check', '-c', file, 'tenant=acme']),
  };
}

describe('config messages (built CLI, spawned)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-config-messages-'));
    await chmod(dir, 0o755); // readable by the unprivileged user of the EACCES case
    await symlink('loop-b.yaml', join(dir, 'loop-a.yaml'));
    await symlink('loop-a.yaml', join(dir, 'loop-b.yaml'));
    await mkdir(join(dir, 'looped'));
    await symlink('self.yaml', join(dir, 'looped', 'self.yaml'));
    await writeFile(join(dir, 'secret.yaml'), 'policies: []\n');
    await chmod(join(dir, 'secret.yaml'), 0o000);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('an empty file gets one message from validate, serve (--config or --policies) and check', async () => {
    const file = 'test/cli/fixtures/empty.yaml';
    const line = `sluice: ${file}: the file is empty ${INVALID}\n`;
    for (const [command, r] of Object.entries(await everyReader(file))) {
      expect({ command, ...r, stdout: '' }).toEqual({ command, ...failed(line), stdout: '' });
    }
    // validate told it is envoy config frames the same message as upstream's config_check.
    expect((await runSluice(['validate', '--format', 'envoy', file])).stderr).toBe(
      `error loading rate limit configs: ${file}: the file is empty\n`,
    );
  });

  it('a symlink loop is named as one, by every command', async () => {
    const file = join(dir, 'loop-a.yaml');
    const line = `sluice: ${file}: cannot read: symlink loop (ELOOP) ${READ}\n`;
    for (const [command, r] of Object.entries(await everyReader(file))) {
      expect({ command, ...r, stdout: '' }).toEqual({ command, ...failed(line), stdout: '' });
    }
    // In a directory: config_check's framing, the same problem.
    const inDir = await runSluice(['validate', join(dir, 'looped')]);
    expect(inDir).toMatchObject({
      code: 1,
      stderr: `error loading rate limit configs: ${join(dir, 'looped', 'self.yaml')}: cannot read: symlink loop (ELOOP)\n`,
    });
  });

  it('a missing file, a directory for a file, a file for a directory: path and problem', async () => {
    expect(await runSluice(['validate', 'test/cli/fixtures/missing.yaml'])).toMatchObject(
      failed(
        `sluice: test/cli/fixtures/missing.yaml: cannot read: no such file or directory (ENOENT) ${READ}\n`,
      ),
    );
    expect(
      await runSluice(['serve', '--config', 'test/cli/fixtures/missing'], { env: SERVE_ENV }),
    ).toMatchObject(
      failed(
        `sluice: test/cli/fixtures/missing: cannot read: no such file or directory (ENOENT) ${READ}\n`,
      ),
    );
    expect(
      await runSluice(['serve', '--config', 'examples/envoy', '--policies', 'examples/envoy'], {
        env: SERVE_ENV,
      }),
    ).toMatchObject(
      failed(
        `sluice: examples/envoy: cannot read: it is a directory, not a file (EISDIR) ${READ}\n`,
      ),
    );
    expect(
      await runSluice(['check', '-c', 'examples/policies.yaml/x.yaml', 'tenant=acme']),
    ).toMatchObject(
      failed(
        `sluice: examples/policies.yaml/x.yaml: cannot read: a part of the path is not a directory (ENOTDIR) ${READ}\n`,
      ),
    );
    expect(await runSluice(['validate', '-config_dir', 'test/cli/fixtures/missing'])).toMatchObject(
      failed(
        'error opening directory test/cli/fixtures/missing: no such file or directory (ENOENT)\n',
      ),
    );
  });

  it('a file the user may not read: permission denied (EACCES)', async () => {
    const file = join(dir, 'secret.yaml');
    // root reads anything: run as nobody then, which needs nobody to reach the CLI (a
    // checkout inside a private folder does not let it).
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534, cwd: dir } : {};
    const reachable = (await runSluice(['--version'], asNobody)).code === 0;
    if (!reachable) {
      // No unprivileged run is possible here: check the words for the code instead.
      const denied = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
      expect(fsProblem(denied)).toBe('permission denied (EACCES)');
      return;
    }
    expect(await runSluice(['validate', file], asNobody)).toMatchObject(
      failed(`sluice: ${file}: cannot read: permission denied (EACCES) ${READ}\n`),
    );
  });

  it('a policy file with four problems lists all four, each as file: path: problem', async () => {
    const file = 'test/config/fixtures/four-problems.yaml';
    expect(await runSluice(['validate', file])).toEqual({
      code: 1,
      stdout: '',
      stderr: [
        `sluice: 4 problems ${INVALID}:`,
        `  ${file}: policies[0].name: must start with a letter or digit and use only letters, digits, "_", "." or "-" (at most 128)`,
        `  ${file}: policies[0].rate: must be > 0`,
        `  ${file}: policies[0]: unknown key "bursts" (not a policy field, nor a field of algorithm "token-bucket")`,
        `  ${file}: policies[0].identity[0]: "route" must be a match key without a fixed value`,
        '',
      ].join('\n'),
      served: false,
    });
  });

  it('check (or serve --policies) given envoy config says what it is and where it goes', async () => {
    const file = 'examples/envoy/config.yaml';
    const line = `sluice: ${file}: ${ENVOY_GIVEN} ${INVALID}\n`;
    expect(await runSluice(['check', '-c', file, 'tenant=acme'])).toMatchObject(failed(line));
    expect(
      await runSluice(['serve', '--config', 'examples/envoy', '--policies', file], {
        env: SERVE_ENV,
      }),
    ).toMatchObject(failed(line));
  });

  it('values of the wrong kind read as path: problem, not as zod issues', async () => {
    const file = 'test/config/fixtures/wrong-types.yaml';
    expect((await runSluice(['check', '-c', file, 'tenant=acme'])).stderr).toBe(
      [
        `sluice: 4 problems ${INVALID}:`,
        `  ${file}: policies[0].match: expected a list, got "tenant"`,
        `  ${file}: policies[0].cost: rules: expected a list, got 3`,
        `  ${file}: policies[0].shadow: expected true or false, got "yes"`,
        `  ${file}: policies[0].rate: expected a number, got "fast"`,
        '',
      ].join('\n'),
    );
  });

  it('a repeated key in envoy config: the last one is used, as yaml.v2 does, with a warning; exit 0', async () => {
    const file = 'test/config/envoy/fixtures/repeated-keys.yaml';
    const r = await runSluice(['validate', file]);
    const repeated = (path: string, key: string): string =>
      `warning: ${file}: ${path}'${key}' is given more than once; the last one is used`;
    expect(r).toEqual({
      code: 0,
      stdout: `checking rate limit configs...\nopening config file: ${file}\nall rate limit configs ok\n`,
      stderr: [
        repeated('', 'domain'),
        repeated('descriptors[0].rate_limit: ', 'unit'),
        repeated('descriptors[0].metadata: ', 'team'),
        repeated('descriptors[0].metadata.owner: ', 'name'),
        repeated('descriptors[0].sluice: ', 'algorithm'),
        '',
      ].join('\n'),
      served: false,
    });
  });

  it('--version (and -V) print the package version', async () => {
    const { version } = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
      version: string;
    };
    for (const flag of ['--version', '-V']) {
      expect(await runSluice([flag])).toEqual({
        code: 0,
        stdout: `${version}\n`,
        stderr: '',
        served: false,
      });
    }
  });

  it('--version works from the packed package', async () => {
    const run = promisify(execFile);
    const packDir = await mkdtemp(join(tmpdir(), 'sluice-version-'));
    try {
      const { stdout } = await run(
        'npm',
        ['pack', '--ignore-scripts', '--json', '--pack-destination', packDir],
        { cwd: root },
      );
      const [{ filename, version }] = JSON.parse(stdout) as [{ filename: string; version: string }];
      await run('tar', ['-xzf', join(packDir, filename), '-C', packDir]);
      // The unpacked package finds its dependencies where an install would put them.
      await symlink(join(root, 'node_modules'), join(packDir, 'node_modules'));
      const cli = join(packDir, 'package', 'dist', 'cli', 'main.js');
      const out = await run(process.execPath, [cli, '--version'], { cwd: packDir });
      expect(out.stdout).toBe(`${version}\n`);
    } finally {
      await rm(packDir, { recursive: true, force: true });
    }
  }, 60_000);
});
