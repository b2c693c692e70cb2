import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../support/redis-server.js';

/**
 * docs/algorithms.md says a new algorithm is three places: its TypeScript file, its Lua
 * file and one registry entry. This copies src/ into a temporary folder, adds an algorithm
 * there in exactly those three places (the fixed window under another name and Lua code,
 * `fixture-window`), and shows that the copy type-checks and that a policy file, the
 * memory store, the Redis store (a real redis-server), the Envoy extension and the
 * capacity plan all take it, with nothing else edited.
 */
const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const BIN = path.join(ROOT, 'node_modules', '.bin');

let dir = '';
let redis: RedisServer;

/** Puts the three places of `fixture-window` into a copy of src/ at `dir`. */
function addFixtureAlgorithm(at: string): void {
  const alg = path.join(at, 'src', 'algorithms');
  const ts = readFileSync(path.join(alg, 'fixed-window.ts'), 'utf8')
    .replace('export const fixedWindow:', 'export const fixtureWindow:')
    .replace("kind: 'fixed-window',", "kind: 'fixture-window',")
    .replace(/luaCode: \d+,/, 'luaCode: 77,');
  writeFileSync(path.join(alg, 'fixture-window.ts'), ts);

  const luaDir = path.join(at, 'src', 'stores', 'redis', 'lua', 'algorithms');
  const lua = readFileSync(path.join(luaDir, 'fixedWindow.lua'), 'utf8')
    .replaceAll('CODE_FIXED_WINDOW', 'CODE_FIXTURE_WINDOW')
    .replaceAll('FW_FIELDS', 'FXW_FIELDS');
  writeFileSync(path.join(luaDir, 'fixtureWindow.lua'), lua);

  const index = path.join(alg, 'index.ts');
  const registry = readFileSync(index, 'utf8')
    .replace(
      "import { fixedWindow } from './fixed-window.js';",
      "import { fixedWindow } from './fixed-window.js';\nimport { fixtureWindow } from './fixture-window.js';",
    )
    .replace(
      "  'fixed-window': fixedWindow,",
      "  'fixed-window': fixedWindow,\n  'fixture-window': fixtureWindow,",
    );
  expect(registry).toContain("'fixture-window': fixtureWindow");
  writeFileSync(index, registry);
}

/** A program in the copy that uses the new algorithm through the public parts. */
const PROGRAM = `
import { parsePolicies } from './src/config/policies.js';
import { loadEnvoyConfigFiles } from './src/config/envoy/load.js';
import { capacityPlan } from './src/capacity/capacity-plan.js';
import { ManualClock } from './src/core/clock.js';
import { createLimiter } from './src/local/create-limiter.js';
import { MemoryStore } from './src/stores/memory/memory-store.js';
import { RedisStore } from './src/stores/redis/redis-store.js';

const input = [
  { name: 'fixture', match: ['tenant'], algorithm: 'fixture-window', limit: 3, window: '1s', timeout: '30s', failureMode: 'closed' },
];
const policies = parsePolicies(input).policies;

// The Redis store decides on the server's clock, so only the memory store moves to the next window.
async function run(store, nextWindow) {
  const clock = new ManualClock(10_000);
  const limiter = createLimiter({ store, policies: input, clock });
  const out = [];
  for (let i = 0; i < 4; i++) {
    const r = await limiter.check({ tenant: 'acme' });
    out.push([r.allowed, r.decision?.remaining, r.decision?.path]);
  }
  if (nextWindow) {
    clock.advance(1_000);
    const r = await limiter.check({ tenant: 'acme' });
    out.push([r.allowed, r.decision?.remaining, r.decision?.path]);
  }
  await limiter.close();
  return out;
}

const memory = await run(new MemoryStore(), true);
const redisStore = RedisStore.connect(process.env.FIXTURE_REDIS_URL);
await redisStore.ready();
const redis = await run(redisStore, false);
await redisStore.close();
const plan = capacityPlan({ policies, peakRps: 100, tenants: 10 });
const envoy = loadEnvoyConfigFiles([
  {
    name: 'fixture.yaml',
    text: 'domain: d\\ndescriptors:\\n  - key: tenant\\n    rate_limit: { unit: second, requests_per_unit: 5 }\\n    sluice: { algorithm: fixture-window }\\n',
  },
]);
console.log(JSON.stringify({
  memory,
  redis,
  planSources: Object.keys(plan.sources),
  envoyAlgorithms: [envoy.domains.d.descriptors.nodes.tenant.rule.sluice.algorithm],
}));
`;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-new-algorithm-'));
  cpSync(path.join(ROOT, 'src'), path.join(dir, 'src'), { recursive: true });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  const tsconfig = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')) as {
    include: string[];
  };
  tsconfig.include = ['src', 'program.ts'];
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
  addFixtureAlgorithm(dir);
  writeFileSync(path.join(dir, 'program.ts'), `// @ts-nocheck\n${PROGRAM}`);
  redis = await RedisServer.start();
}, 120_000);

afterAll(async () => {
  await redis?.stop();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('a new algorithm is three places', () => {
  it('the copy with fixture-window added type-checks', async () => {
    const r = await run(path.join(BIN, 'tsc'), ['-p', dir, '--noEmit'], { cwd: dir }).then(
      () => ({ ok: true, out: '' }),
      (e: { stdout?: string }) => ({ ok: false, out: e.stdout ?? String(e) }),
    );
    expect(r.out).toBe('');
    expect(r.ok).toBe(true);
  }, 180_000);

  it('a policy file, both stores, the Envoy extension and the plan take it', async () => {
    const { stdout } = await run(path.join(BIN, 'tsx'), ['program.ts'], {
      cwd: dir,
      env: { ...process.env, FIXTURE_REDIS_URL: redis.url },
    });
    const got = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    // 3 per window: three admitted (2, 1, 0 left), the fourth denied; in the next window, admitted.
    const expected = [
      [true, 2, 'store'],
      [true, 1, 'store'],
      [true, 0, 'store'],
      [false, 0, 'store'],
      [true, 2, 'store'],
    ];
    expect(got.memory).toEqual(expected);
    expect(got.redis).toEqual(expected.slice(0, 4));
    expect(got.planSources).toContain('Redis CPU per decision, fixture-window');
    expect(got.planSources).toContain('Redis memory per bucket, fixture-window');
    expect(got.envoyAlgorithms).toEqual(['fixture-window']);
  }, 180_000);
});
