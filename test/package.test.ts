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

  it('resolves sluice/http and sluice/fastify, and answers 429 over node:http, with neither Express nor Fastify installed', async () => {
    const code = `
      import { createServer } from 'node:http';
      import { createRequire } from 'node:module';
      import { createLimiter, MemoryStore } from 'sluice';
      import { byClientIp, createHttpRateLimit } from 'sluice/http';
      import { createFastifyRateLimit } from 'sluice/fastify';
      const installed = (m) => { try { createRequire(import.meta.url).resolve(m); return 'installed'; } catch { return 'absent'; } };
      const limiter = createLimiter({ store: new MemoryStore(), policies: [{ name: 'per-ip', match: ['client_ip'], rate: 1, period: '1h', burst: 1 }] });
      const limits = createHttpRateLimit({ limiter, descriptor: byClientIp() });
      const server = createServer(async (req, res) => {
        if (await limits.check(req, res, { name: 'GET /' })) res.end('ok');
      }).listen(0, '127.0.0.1', async () => {
        const url = 'http://127.0.0.1:' + server.address().port + '/';
        const a = await fetch(url); const b = await fetch(url);
        console.log(a.status, b.status, b.headers.get('retry-after'), typeof createFastifyRateLimit, installed('fastify'), installed('express'));
        server.close(); server.closeAllConnections();
      });`;
    await writeFile(join(dir, 'http.mjs'), code);
    const { stdout } = await run(process.execPath, ['http.mjs'], { cwd: dir });
    expect(stdout.trim()).toBe('200 429 3600 function absent absent');
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
    expect(files).toContain('dist/http.d.ts');
    expect(files).toContain('dist/fastify.d.ts');
    expect(files).toContain('dist/stores/redis/lua/applyBatches.lua');
    expect(files).toContain('dist/stores/redis/lua/includes/tokenBucket.lua');
    expect(files).toContain('dist/service/proto/sluice/v1/sluice.proto');
    expect(files).toContain('dist/cli/main.js');
    expect(files.some((f) => f.startsWith('test/') || f.startsWith('src/'))).toBe(false);
  });
});
