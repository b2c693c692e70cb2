/**
 * The package as users get it: `npm pack`, installed into an empty folder (offline, from
 * the npm cache `npm ci` filled), imported and run. Needs `npm run build` (pretest does it).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..');
let dir: string;

describe('npm pack', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-pack-'));
    const { stdout } = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', dir],
      { cwd: root },
    );
    const [{ filename }] = JSON.parse(stdout) as [{ filename: string }];
    // Offline installs may only use what `npm ci` cached: pin every runtime dependency to
    // the version this repository's lockfile resolved, so npm never wants a newer one.
    const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean }>;
    };
    const overrides = Object.fromEntries(
      Object.entries(lock.packages)
        .filter(([path, p]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path) && !p.dev && p.version)
        .map(([path, p]) => [path.slice('node_modules/'.length), p.version]),
    );
    await writeFile(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module', overrides }),
    );
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, filename)], {
      cwd: dir,
    });
  }, 180_000);
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('installs into an empty folder, imports by name and decides', async () => {
    const code = `
      import { createLimiter, MemoryStore } from 'sluice';
      const l = createLimiter({ store: new MemoryStore(), policies: [{ name: 'p', match: ['t'], rate: 1, burst: 1 }] });
      const a = await l.check({ t: 'x' }); const b = await l.check({ t: 'x' });
      console.log(a.allowed, b.allowed, b.status);`;
    await writeFile(join(dir, 'main.mjs'), code);
    const { stdout } = await run(process.execPath, ['main.mjs'], { cwd: dir });
    expect(stdout.trim()).toBe('true false OVER_LIMIT');
  });

  it('resolves the sluice/redis subpath and loads its Lua scripts', async () => {
    await writeFile(
      join(dir, 'redis.mjs'),
      `import { RedisStore } from 'sluice/redis'; console.log(typeof RedisStore, typeof RedisStore.connect);`,
    );
    const { stdout } = await run(process.execPath, ['redis.mjs'], { cwd: dir });
    expect(stdout.trim()).toBe('function function');
  });

  it('ships the sluice bin and the example policies', async () => {
    const { stdout } = await run(
      join(dir, 'node_modules/.bin/sluice'),
      ['validate', 'node_modules/sluice/examples/policies.yaml'],
      { cwd: dir },
    );
    expect(stdout).toBe('node_modules/sluice/examples/policies.yaml: ok (1 policy)\n');
  });

  it('ships type declarations for every export path', async () => {
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--dry-run', '--json'], {
      cwd: root,
    });
    const files = (JSON.parse(stdout) as [{ files: { path: string }[] }])[0].files.map(
      (f) => f.path,
    );
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('dist/redis.d.ts');
    expect(files).toContain('dist/stores/redis/lua/applyBatch.lua');
    expect(files).toContain('dist/stores/redis/lua/includes/tokenBucket.lua');
    expect(files).toContain('dist/service/proto/sluice/v1/sluice.proto');
    expect(files).toContain('dist/cli/main.js');
    expect(files.some((f) => f.startsWith('test/') || f.startsWith('src/'))).toBe(false);
  });
});
