/**
 * The layer rules (.dependency-cruiser.js, run by `npm run layers`): src/ keeps them, and
 * each kind of violation fails them. The violations are written into a temporary tree
 * shaped like src/, checked with the repository's rules file, so src/ is never touched.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const rules = join(root, '.dependency-cruiser.js');
const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

interface Cruise {
  readonly code: number;
  /** `rule: from` of each violation reported, sorted. */
  readonly violations: readonly string[];
  readonly output: string;
}

/**
 * Runs `npm run layers`'s command (from package.json, the rules file made absolute) on
 * `src` in `cwd`; its exit status is what fails `npm test`.
 */
async function cruise(cwd: string): Promise<Cruise> {
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const [bin, ...args] = (pkg.scripts['layers'] ?? '').split(' ');
  expect(bin).toBe('depcruise');
  const argv = args.map((a) => (a === '.dependency-cruiser.js' ? rules : a));
  return new Promise((resolve) => {
    execFile(process.execPath, [depcruise, ...argv], { cwd }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      const output = `${stdout}${stderr}`;
      const violations = [...output.matchAll(/^\s*error (\S+): (\S+) →/gm)]
        .map((m) => `${m[1]}: ${m[2]}`)
        .sort();
      resolve({ code, violations, output });
    });
  });
}

/** A tree with a tsconfig.json like the repository's and the given files. */
async function tree(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-layers-'));
  const all: Record<string, string> = {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
      include: ['src'],
    }),
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return dir;
}

const dirs: string[] = [];
let clean: Cruise;
let bad: Cruise;

beforeAll(async () => {
  // Downward imports only: the rules must pass this tree, or they flag everything.
  const good = await tree({
    'src/core/a.ts': 'export const a = 1;\n',
    'src/protocol/p.ts': "import { a } from '../core/a.js';\nexport const p = a;\n",
    'src/limiter/l.ts': "import { a } from '../core/a.js';\nexport const l = a;\n",
    'src/service/s.ts':
      "import { l } from '../limiter/l.js';\nimport { p } from '../protocol/p.js';\nexport const s = l + p;\n",
    'src/index.ts': "export { s } from './service/s.js';\n",
  });
  const wrong = await tree({
    // upward: core imports the service
    'src/core/a.ts': "import { s } from '../service/s.js';\nexport const a = s;\n",
    'src/service/s.ts': 'export const s = 1;\n',
    // sideways: one stage imports another
    'src/local/stage.ts': "import { q } from '../quota/q.js';\nexport const stage = q;\n",
    'src/quota/q.ts': 'export const q = 1;\n',
    // protocol imports config, which is not core
    'src/protocol/p.ts': "import { c } from '../config/c.js';\nexport const p = c;\n",
    'src/config/c.ts': 'export const c = 1;\n',
    // a cycle inside one layer, through a type-only import
    'src/limiter/x.ts': "import type { Y } from './y.js';\nexport type X = { y?: Y };\n",
    'src/limiter/y.ts': "import type { X } from './x.js';\nexport type Y = { x?: X };\n",
  });
  dirs.push(good, wrong);
  [clean, bad] = [await cruise(good), await cruise(wrong)];
}, 120_000);

afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('layer rules', () => {
  it('src/ keeps them', async () => {
    const own = await cruise(root);
    expect(own.violations, own.output).toEqual([]);
    expect(own.code).toBe(0);
  }, 120_000);

  it('pass a tree that imports only downward', () => {
    expect(clean.violations, clean.output).toEqual([]);
    expect(clean.code).toBe(0);
  });

  it('fail an upward, a sideways, a protocol and a circular import, naming each', () => {
    // A cycle is reported once, from whichever of its modules depcruise reaches first.
    const found = bad.violations.map((v) => v.replace(/limiter\/[xy]\.ts$/, 'limiter/<x|y>'));
    expect(found, bad.output).toEqual([
      'layer-core: src/core/a.ts',
      'layer-local: src/local/stage.ts',
      'layer-protocol: src/protocol/p.ts',
      'no-circular: src/limiter/<x|y>',
      'protocol-imports-only-core: src/protocol/p.ts',
    ]);
    expect(bad.code).not.toBe(0);
  });
});
