/**
 * What one decision costs Redis in instructions, counted by callgrind: redis-server runs
 * under `valgrind --tool=callgrind`, Sluice's function library (the applyBatches script as
 * `npm run build` put it in dist/) is loaded, and calls shaped like the ones RedisStore
 * sends are replayed: `--batches 1` (a lone check, c=1) and `--batches 32` (a coalesced
 * call at c=64), over Zipf(1.0) keys or one hot key. Instructions are counted, not
 * seconds, so a figure repeats on a busy 2-core machine (within about 0.5 % here), where
 * timings of the same script swing by 10 % from run to run.
 *
 * A figure is marginal: two servers replay N and 2N calls after the same warm-up, and the
 * difference is divided by the N calls' decisions, so start-up and loading cancel out.
 * `--lua <file>` replays a modified applyBatches.lua source (as scripts.ts assembles it,
 * `APPLY_BATCH_LUA`) instead, to price a change before making it.
 *
 * `npx tsx bench/script-instructions.ts [--batches 1,32] [--dist zipf|hot] [--lua file]`
 * (about 1 minute per figure). Needs valgrind (Debian package `valgrind`; installed when
 * run as root). Prints a markdown table; asserts nothing.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { ensureDebianCommand } from '../test/support/debian-package.js';
import { keyRing, RING_MASK, type Distribution } from './lib/rng.js';
import { loadSluice, SLUICE_ROOT } from './lib/sluice.js';

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const batchSizes = (argValue('--batches') ?? '1,32').split(',').map(Number);
const dist = (argValue('--dist') ?? 'zipf') as Distribution;
const luaFile = argValue('--lua');
/** Calls replayed before counting starts to matter (keys warm, library loaded). */
const WARM_CALLS = 300;
/** N: the second server replays 2N. */
const CALLS = 600;
const KEYS = 100_000;

const valgrind = await ensureDebianCommand('valgrind', 'valgrind');
await loadSluice(!process.argv.includes('--no-build'));
const fromDist = (p: string): string => path.join(SLUICE_ROOT, 'dist', p);
const { encodeBatches } = (await import(
  fromDist('stores/redis/wire.js')
)) as typeof import('../src/stores/redis/wire.js');
const { APPLY_BATCH_LUA } = (await import(
  fromDist('stores/redis/scripts.js')
)) as typeof import('../src/stores/redis/scripts.js');
const { algorithmOf } = (await import(
  fromDist('algorithms/index.js')
)) as typeof import('../src/algorithms/index.js');

const source = luaFile === undefined ? APPLY_BATCH_LUA : fs.readFileSync(luaFile, 'utf8');
const body = source.replace(/\nreturn applyBatches\(KEYS, ARGV\)\n?$/, '\n');
const LIBRARY = 'sluice_instructions';
const library = `#!lua name=${LIBRARY}\n${body}\nredis.register_function('${LIBRARY}', applyBatches)\n`;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** The calls to replay: `batches` one-check batches each, token bucket, all allow. */
function calls(batches: number): { keys: string[]; packed: Buffer }[] {
  const ring = keyRing(dist, KEYS, 7);
  const tb = algorithmOf('token-bucket');
  const params = { rate: 1e9, periodMs: 1_000, burst: 1e9 };
  const out: { keys: string[]; packed: Buffer }[] = [];
  let n = 0;
  for (let c = 0; c < 200; c++) {
    const wire = [];
    for (let b = 0; b < batches; b++) {
      const key = `slb:{tenant-${ring[n++ & RING_MASK]!}}:tenant`;
      wire.push({
        items: [{ key, algorithm: tb, params, cost: 1, enforce: true }],
        keys: [key],
        nowMs: undefined,
        dedup: false,
        dedupTtlMs: 0,
      });
    }
    out.push(encodeBatches(wire));
  }
  return out;
}

/** Total instructions of a redis-server that replayed WARM_CALLS + `count` calls. */
async function instructions(replay: { keys: string[]; packed: Buffer }[], count: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-callgrind-'));
  const out = path.join(dir, 'callgrind.out');
  const port = await freePort();
  const server = spawn(
    valgrind,
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      // Fewer timer-driven chores: valgrind slows the server, which would give them more
      // turns per call, and they are no decision's cost.
      '--hz',
      '1',
      '--latency-tracking',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined); // refused until the server listens: retried below
  try {
    for (let i = 0; ; i++) {
      try {
        await client.connect();
        await client.ping();
        break;
      } catch (error) {
        if (i > 150) throw error;
        client.disconnect();
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    await client.call('FUNCTION', 'LOAD', library);
    const send = (c: { keys: string[]; packed: Buffer }) =>
      client.callBuffer('FCALL', LIBRARY, c.keys.length, ...c.keys, c.packed);
    for (let i = 0; i < WARM_CALLS + count; i++) await send(replay[i % replay.length]!);
    await client.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
  } finally {
    client.disconnect();
    await exited;
  }
  const totals = /^totals:\s+(\d+)/m.exec(fs.readFileSync(out, 'utf8'));
  fs.rmSync(dir, { recursive: true, force: true });
  if (totals === null) throw new Error(`no totals in ${out}`);
  return Number(totals[1]);
}

console.log(
  `applyBatches under callgrind (${luaFile ?? 'dist/ as built'}), ${dist} keys, token bucket, marginal over ${CALLS} calls\n`,
);
console.log('| checks per call | instructions per call | instructions per decision |');
console.log('| --: | --: | --: |');
for (const batches of batchSizes) {
  const replay = calls(batches);
  const once = await instructions(replay, CALLS);
  const twice = await instructions(replay, 2 * CALLS);
  const perCall = (twice - once) / CALLS;
  console.log(
    `| ${batches} | ${Math.round(perCall).toLocaleString('en-US')} | ${Math.round(perCall / batches).toLocaleString('en-US')} |`,
  );
}
