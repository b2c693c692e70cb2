import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadEnvoyConfigDir } from '../../../src/config/envoy/load.js';
import {
  ENVOY_RUNTIME_DEFAULTS,
  envoyRuntimeSettingsFromEnv,
  listEnvoyConfigFiles,
  type EnvoyRuntimeSettings,
} from '../../../src/config/envoy/runtime-dir.js';
import { PolicyError } from '../../../src/core/errors.js';

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sluice-envoy-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function put(path: string, text = 'domain: d\n'): Promise<void> {
  await mkdir(dirname(join(root, path)), { recursive: true });
  await writeFile(join(root, path), text);
}

const settings = (over: Partial<EnvoyRuntimeSettings> = {}): EnvoyRuntimeSettings => ({
  ...ENVOY_RUNTIME_DEFAULTS,
  runtimeRoot: root,
  runtimeSubdirectory: 'ratelimit',
  ...over,
});

describe('envoyRuntimeSettingsFromEnv', () => {
  it('has upstream’s defaults', () => {
    expect(envoyRuntimeSettingsFromEnv({})).toEqual({
      runtimeRoot: '/srv/runtime_data/current',
      runtimeSubdirectory: '',
      runtimeAppDirectory: 'config',
      runtimeWatchRoot: true,
      runtimeIgnoreDotFiles: false,
      mergeDomainConfig: false,
    });
  });

  it('reads upstream’s variables, booleans as Go spells them', () => {
    expect(
      envoyRuntimeSettingsFromEnv({
        RUNTIME_ROOT: '/data',
        RUNTIME_SUBDIRECTORY: 'rl',
        RUNTIME_APPDIRECTORY: 'limits',
        RUNTIME_WATCH_ROOT: 'f',
        RUNTIME_IGNOREDOTFILES: '1',
        MERGE_DOMAIN_CONFIG: 'TRUE',
      }),
    ).toEqual({
      runtimeRoot: '/data',
      runtimeSubdirectory: 'rl',
      runtimeAppDirectory: 'limits',
      runtimeWatchRoot: false,
      runtimeIgnoreDotFiles: true,
      mergeDomainConfig: true,
    });
  });

  it('refuses a boolean it cannot read, naming the variable', () => {
    try {
      envoyRuntimeSettingsFromEnv({ MERGE_DOMAIN_CONFIG: 'yes' });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(PolicyError);
      expect((e as PolicyError).issues).toEqual([
        {
          path: 'MERGE_DOMAIN_CONFIG',
          message:
            'expected a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False), got "yes"',
        },
      ]);
    }
  });
});

describe('listEnvoyConfigFiles', () => {
  beforeEach(async () => {
    await put('ratelimit/config/b.yaml');
    await put('ratelimit/config/a.yml');
    await put('ratelimit/config/README');
    await put('ratelimit/config/team/c.yaml');
    await put('ratelimit/config/.hidden.yaml');
    await put('ratelimit/config/.old/d.yaml');
    await put('ratelimit/config.extra');
    await put('ratelimit/other/e.yaml');
  });

  it('watching the root: walks SUBDIRECTORY and keeps keys starting with "APPDIRECTORY."', async () => {
    const { files, warnings } = await listEnvoyConfigFiles(settings());
    expect(files.map((f) => f.key)).toEqual([
      'config..hidden.yaml',
      'config..old.d.yaml',
      'config.README',
      'config.a.yml',
      'config.b.yaml',
      'config.extra',
      'config.team.c.yaml',
    ]);
    expect(files.find((f) => f.key === 'config.b.yaml')?.path).toBe(
      join(root, 'ratelimit', 'config', 'b.yaml'),
    );
    expect(warnings).toEqual([]);
  });

  it('not watching the root: walks SUBDIRECTORY/APPDIRECTORY and keeps every file', async () => {
    const { files } = await listEnvoyConfigFiles(settings({ runtimeWatchRoot: false }));
    expect(files.map((f) => f.key)).toEqual([
      '.hidden.yaml',
      '.old.d.yaml',
      'README',
      'a.yml',
      'b.yaml',
      'team.c.yaml',
    ]);
  });

  it('RUNTIME_IGNOREDOTFILES skips dot files and dot directories', async () => {
    const { files } = await listEnvoyConfigFiles(settings({ runtimeIgnoreDotFiles: true }));
    expect(files.map((f) => f.key)).toEqual([
      'config.README',
      'config.a.yml',
      'config.b.yaml',
      'config.extra',
      'config.team.c.yaml',
    ]);
  });

  it('an empty RUNTIME_SUBDIRECTORY loads nothing, as upstream', async () => {
    const { files, warnings } = await listEnvoyConfigFiles(settings({ runtimeSubdirectory: '' }));
    expect(files).toEqual([]);
    expect(warnings.map((w) => w.message)).toEqual([
      'RUNTIME_ROOT or RUNTIME_SUBDIRECTORY is empty: no config is loaded',
    ]);
  });

  it('a missing directory loads nothing, with a warning', async () => {
    const { files, warnings } = await listEnvoyConfigFiles(
      settings({ runtimeSubdirectory: 'nope' }),
    );
    expect(files).toEqual([]);
    expect(warnings).toEqual([
      { file: join(root, 'nope'), path: '', message: 'runtime: error processing: ENOENT' },
    ]);
  });
});

describe('loadEnvoyConfigDir', () => {
  const tenant = (domain: string, key: string): string =>
    `domain: ${domain}\ndescriptors:\n  - key: ${key}\n    rate_limit: { unit: second, requests_per_unit: 1 }\n`;

  it('loads the files upstream reads, skipping what it cannot read', async () => {
    await put('ratelimit/config/a.yaml', tenant('shop', 'tenant'));
    await put('ratelimit/config/b.yaml', tenant('edge', 'ip'));
    await mkdir(join(root, 'elsewhere'));
    await symlink(join(root, 'elsewhere'), join(root, 'ratelimit/config/linked'));
    const { config, files } = await loadEnvoyConfigDir(settings());
    expect(Object.keys(config.domains).sort()).toEqual(['edge', 'shop']);
    expect(files.map((f) => f.key)).toEqual(['config.a.yaml', 'config.b.yaml']);
    expect(config.warnings).toEqual([
      {
        file: join(root, 'ratelimit/config/linked'),
        path: '',
        message: 'runtime: error reading: EISDIR',
      },
    ]);
  });

  it('MERGE_DOMAIN_CONFIG decides whether a domain may span files', async () => {
    await put('ratelimit/config/a.yaml', tenant('shop', 'tenant'));
    await put('ratelimit/config/b.yaml', tenant('shop', 'route'));
    const merged = await loadEnvoyConfigDir(settings({ mergeDomainConfig: true }));
    expect(Object.keys(merged.config.domains.shop!.descriptors.nodes)).toEqual(['tenant', 'route']);
    await expect(loadEnvoyConfigDir(settings(), { nameBy: 'runtime-key' })).rejects.toThrow(
      "config.b.yaml: duplicate domain 'shop' in config file",
    );
    await expect(loadEnvoyConfigDir(settings())).rejects.toThrow(
      `${join(root, 'ratelimit/config/b.yaml')}: duplicate domain 'shop' in config file`,
    );
  });
});
