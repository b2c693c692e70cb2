/**
 * Instructions per check, this build against another (run with
 * `npx tsx bench/instructions.ts [--before <dir>] [--checks <n>] [--mode sync|async|both]`).
 *
 * Wall-clock and CPU-time figures on a shared 2-core VM swing by ±10–15 % between runs
 * of the same build, which hides a change of a few percent. An instruction count does
 * not: each build's checks run under valgrind's callgrind (`node --single-threaded
 * --predictable`, so compilation and GC happen at the same points every run), once with
 * `--checks / 10` and once with `--checks` + that, and the difference divided by
 * `--checks` is the instructions one check costs, start-up and warm-up cancelled out.
 * Repeat runs of one build agree within about ±20 instructions (under 1 %). The workload
 * is the pinned bench's memory row: MemoryStore, one token-bucket policy that never
 * denies, Zipf(1.0) over 100,000 tenants; `sync` is `checkSync`, `async` an awaited
 * `check`.
 *
 * Needs `valgrind` (Debian package `valgrind`; installed first when running as root).
 * About 90 s per build and mode at the default 2,000,000 checks. Nothing here asserts.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureDebianCommand } from '../test/support/debian-package.js';

const run = promisify(execFile);
const root = path.join(import.meta.dirname, '..');

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  if (i === -1) return undefined;
  const value = process.argv[i + 1];
  if (value === undefined || value.startsWith('--')) {
    throw new Error(`bench/instructions.ts: ${name} needs a value`);
  }
  return value;
}

const before = flag('--before');
const checks = Number(flag('--checks') ?? '2000000');
if (!Number.isSafeInteger(checks) || checks < 10_000) {
  throw new Error(`bench/instructions.ts: --checks must be an integer of at least 10000`);
}
const modeFlag = flag('--mode') ?? 'both';
if (!['sync', 'async', 'both'].includes(modeFlag)) {
  throw new Error(`bench/instructions.ts: --mode is sync, async or both, got ${modeFlag}`);
}
const modes = modeFlag === 'both' ? (['sync', 'async'] as const) : [modeFlag as 'sync' | 'async'];

/** The checks loop, run in a child so that only it is counted. */
const WORKLOAD = `
const [root, nStr, mode] = process.argv.slice(2);
const N = Number(nStr), KEYS = 100000, RING = 1 << 16;
let seed = 12345;
const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const cdf = new Float64Array(KEYS);
let sum = 0;
for (let i = 0; i < KEYS; i++) { sum += 1 / (i + 1); cdf[i] = sum; }
const ring = new Uint32Array(RING);
for (let j = 0; j < RING; j++) {
  const u = rnd() * sum; let lo = 0, hi = KEYS - 1;
  while (lo < hi) { const m = (lo + hi) >> 1; if (cdf[m] < u) lo = m + 1; else hi = m; }
  ring[j] = lo;
}
const tenants = Array.from({ length: KEYS }, (_, i) => 'tenant-' + i);
const m = await import(root + '/dist/index.js');
const limiter = m.createLimiter({ store: new m.MemoryStore(), policies: [{ name: 'tenant',
  match: ['tenant'], algorithm: 'token-bucket', rate: 1e9, burst: 1e9, timeout: '5s',
  failureMode: 'closed' }] });
let c = 0, denied = 0;
if (mode === 'sync') {
  for (let i = 0; i < N; i++) if (!limiter.checkSync({ tenant: tenants[ring[c++ & (RING - 1)]] }).allowed) denied++;
} else {
  for (let i = 0; i < N; i++) if (!(await limiter.check({ tenant: tenants[ring[c++ & (RING - 1)]] })).allowed) denied++;
}
if (denied > 0) throw new Error(denied + ' checks denied');
`;

async function instructions(
  valgrind: string,
  script: string,
  build: string,
  n: number,
  mode: string,
): Promise<number> {
  const { stderr } = await run(
    valgrind,
    [
      '--tool=callgrind',
      '--callgrind-out-file=/dev/null',
      '--smc-check=all-non-file',
      process.execPath,
      '--single-threaded',
      '--predictable',
      '--max-semi-space-size=64',
      script,
      build,
      String(n),
      mode,
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const m = /Collected : (\d+)/.exec(stderr);
  if (m === null)
    throw new Error(`callgrind printed no count for ${build}:\n${stderr.slice(-2000)}`);
  return Number(m[1]);
}

async function perCheck(
  valgrind: string,
  script: string,
  build: string,
  mode: string,
): Promise<number> {
  const base = Math.round(checks / 10);
  const [a, b] = await Promise.all([
    instructions(valgrind, script, build, base, mode),
    instructions(valgrind, script, build, base + checks, mode),
  ]);
  return (b - a) / checks;
}

const valgrind = await ensureDebianCommand('valgrind', 'valgrind');
const builds = [root, ...(before === undefined ? [] : [path.resolve(before)])];
for (const b of builds) {
  if (!fs.existsSync(path.join(b, 'dist/index.js'))) {
    throw new Error(
      `bench/instructions.ts: ${b}/dist/index.js is missing: run npm run build there`,
    );
  }
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-instructions-'));
const script = path.join(dir, 'workload.mjs');
fs.writeFileSync(script, WORKLOAD);
try {
  console.log(`| build | mode | instructions per check |\n|---|---|--:|`);
  const results = new Map<string, number>();
  for (const mode of modes) {
    for (const b of builds) {
      const n = await perCheck(valgrind, script, b, mode);
      results.set(`${b} ${mode}`, n);
      console.log(
        `| ${b === root ? 'this' : b} | ${mode} | ${Math.round(n).toLocaleString('en-US')} |`,
      );
    }
  }
  if (before !== undefined) {
    for (const mode of modes) {
      const ratio =
        results.get(`${root} ${mode}`)! / results.get(`${path.resolve(before)} ${mode}`)!;
      console.log(`\n${mode}: this / before = ${ratio.toFixed(3)}x`);
    }
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
