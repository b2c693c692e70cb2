/**
 * The package as users get it: `npm pack`, installed into an empty folder, imported,
 * type-checked and run. Needs `npm run build` (pretest does it).
 *
 * The install uses neither the network nor npm's cache (a fresh machine's cache holds no
 * registry metadata, so `npm install --offline` of a tarball fails with ENOTCACHED): the
 * tarball is installed together with copies of its runtime dependencies, taken as local
 * folders from this repository's node_modules (the versions package-lock.json resolved),
 * with an empty cache of its own.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..');
let dir: string;
let packed: string[];

/** Every runtime package the lockfile installed, as a `file:` folder in node_modules. */
async function runtimeFolders(): Promise<Record<string, string>> {
  const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean; optional?: boolean }>;
  };
  const folders: Record<string, string> = {};
  for (const [path, p] of Object.entries(lock.packages)) {
    if (path === '' || p.dev) continue;
    const folder = join(root, path);
    if (!existsSync(folder) && p.optional) continue; // another platform's optional package
    const name = /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(path)?.[1];
    if (name === undefined) {
      // A nested copy cannot be named at the top level: npm would look for it in the registry.
      throw new Error(`package.test: nested runtime package ${path} cannot be installed offline`);
    }
    folders[name] = `file:${folder}`;
  }
  return folders;
}

/** Bare specifiers the compiled code imports (`node:` built-ins excluded), as package names. */
async function importedPackages(distDir: string): Promise<Set<string>> {
  const names = new Set<string>();
  const files = (await readdir(distDir, { recursive: true })).filter((f) => f.endsWith('.js'));
  for (const file of files) {
    const code = await readFile(join(distDir, file), 'utf8');
    const specifiers = [
      ...code.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*'([^']+)'/gm),
      ...code.matchAll(/^\s*import\s*'([^']+)'/gm),
      ...code.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
    ].map((m) => m[1]!);
    for (const s of specifiers) {
      if (s.startsWith('.') || s.startsWith('node:')) continue;
      names.add(/^(?:@[^/]+\/)?[^/]+/.exec(s)![0]);
    }
  }
  return names;
}

describe('npm pack', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-pack-'));
    const { stdout } = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', dir],
      { cwd: root },
    );
    const [{ filename, files }] = JSON.parse(stdout) as [
      { filename: string; files: { path: string }[] },
    ];
    packed = files.map((f) => f.path);
    await writeFile(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'consumer',
        private: true,
        type: 'module',
        dependencies: { ...(await runtimeFolders()), sluice: `file:${join(dir, filename)}` },
      }),
    );
    // --install-links copies the folders (a link would let npm write into the repository's
    // node_modules); the cache is a new folder, so nothing from an earlier install helps.
    await run(
      'npm',
      [
        'install',
        '--offline',
        '--install-links',
        '--ignore-scripts',
        '--no-package-lock',
        '--no-audit',
        '--no-fund',
      ],
      { cwd: dir, env: { ...process.env, npm_config_cache: join(dir, '.npm-cache') } },
    );
  }, 180_000);
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('packs the build, its Lua scripts and protos, the docs and example policies, and no sources', () => {
    for (const entry of ['index', 'redis', 'client', 'http', 'fastify', 'overload', 'quota']) {
      expect(packed).toContain(`dist/${entry}.js`);
      expect(packed).toContain(`dist/${entry}.d.ts`);
    }
    expect(packed).toContain('dist/cli/main.js');
    expect(packed).toContain('dist/stores/redis/lua/applyBatches.lua');
    expect(packed).toContain('dist/stores/redis/lua/algorithms/tokenBucket.lua');
    expect(packed).toContain('dist/protocol/proto/sluice/v1/sluice.proto');
    expect(packed).toContain(
      'dist/protocol/proto/upstream/envoy/service/rate_limit_quota/v3/rlqs.proto',
    );
    expect(packed).toContain('examples/policies.yaml');
    expect(packed).toContain('README.md');
    expect(packed).toContain('docs/policies.md');
    expect(packed.filter((f) => !/^(dist|docs)\//.test(f)).sort()).toEqual([
      'README.md',
      'examples/policies.yaml',
      'package.json',
    ]);
  });

  it('declares every package its code imports as a dependency (or Fastify as an optional peer)', async () => {
    const pkg = JSON.parse(
      await readFile(join(dir, 'node_modules/sluice/package.json'), 'utf8'),
    ) as {
      dependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
    };
    const declared = new Set([
      ...Object.keys(pkg.dependencies),
      ...Object.keys(pkg.peerDependencies),
    ]);
    const imported = await importedPackages(join(dir, 'node_modules/sluice/dist'));
    expect(imported).toContain('ioredis'); // the scan finds imports at all
    expect([...imported].filter((name) => !declared.has(name))).toEqual([]);
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

  it('resolves the sluice/redis and sluice/client subpaths and loads their Lua scripts and protos', async () => {
    await writeFile(
      join(dir, 'redis.mjs'),
      `import { RedisStore } from 'sluice/redis';
       import { SluiceClient } from 'sluice/client';
       const client = new SluiceClient({ address: '127.0.0.1:1' });
       console.log(typeof RedisStore, typeof RedisStore.connect, typeof client.check);
       client.close();`,
    );
    const { stdout } = await run(process.execPath, ['redis.mjs'], { cwd: dir });
    expect(stdout.trim()).toBe('function function function');
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

  it('type-checks the README example and every export path against the packed declarations', async () => {
    // The README's block is examples/quickstart.ts verbatim (test/readme.test.ts holds that).
    await writeFile(
      join(dir, 'quickstart.ts'),
      await readFile(join(root, 'examples/quickstart.ts'), 'utf8'),
    );
    // Each @ts-expect-error fails the check if its import resolved to `any`.
    await writeFile(
      join(dir, 'subpaths.ts'),
      `import { createLimiter, type Decision } from 'sluice';
       import { RedisStore } from 'sluice/redis';
       import { tokenBucket, type Stage, type Store as EngineStore } from 'sluice/engine';
       import type { Store } from 'sluice';
       import { SluiceClient } from 'sluice/client';
       import { createHttpRateLimit } from 'sluice/http';
       import { createFastifyRateLimit } from 'sluice/fastify';
       import { createAdmissionBoundary, type Criticality } from 'sluice/overload';
       // @ts-expect-error createLimiter needs options
       createLimiter();
       // @ts-expect-error a Decision's status is a Status
       export const status: Decision['status'] = 'MAYBE';
       // @ts-expect-error RedisStore.connect needs options
       void RedisStore.connect();
       // @ts-expect-error SluiceClient needs options
       new SluiceClient();
       // @ts-expect-error createHttpRateLimit needs options
       createHttpRateLimit();
       // @ts-expect-error createFastifyRateLimit needs options
       createFastifyRateLimit();
       // @ts-expect-error the queue's order is 'fifo' or 'lifo'
       createAdmissionBoundary({ queue: { order: 'random' } });
       // @ts-expect-error a Criticality is one of the four levels
       export const level: Criticality = 'URGENT';
       // The store a library user holds is the one an extension implements.
       export const same = (s: EngineStore): Store => s;
       // @ts-expect-error a transition needs its state, time, cost and params
       tokenBucket.transition();
       // @ts-expect-error a stage has a name
       export const stage: Stage = {};
      `,
    );
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          // node_modules/@types of this repository: the consumer need not install @types/node.
          typeRoots: [join(root, 'node_modules/@types')],
          types: ['node'],
        },
        files: ['quickstart.ts', 'subpaths.ts'],
      }),
    );
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const result = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir }).then(
      ({ stdout }) => stdout,
      (error: { stdout: string }) => error.stdout,
    );
    expect(result).toBe('');
  });

  it('ships the sluice bin and the example policies', async () => {
    const { stdout } = await run(
      join(dir, 'node_modules/.bin/sluice'),
      ['validate', 'node_modules/sluice/examples/policies.yaml'],
      { cwd: dir },
    );
    expect(stdout).toBe('node_modules/sluice/examples/policies.yaml: ok (1 policy)\n');
  });
});
