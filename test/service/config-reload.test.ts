/**
 * Config reload through the file watcher, end to end: startService() on the memory store,
 * the config changed on disk the ways operators change it (in-place write, atomic rename,
 * `sed -i`, a swap of upstream's RUNTIME_ROOT symlink, a file added), and every change
 * proven by the answers and by the count of config loads. Nothing here calls reload():
 * a dead watcher fails every test.
 */
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { RunningService, ServeOptions } from '../../src/service/main.js';
import { startLoopbackService } from '../support/loopback-service.js';
import { waitFor } from '../support/wait.js';
import { call, connect } from './grpc/client.js';

const fixtures = join(import.meta.dirname, 'fixtures');
const running: RunningService[] = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.shutdown()));
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'sluice-reload-'));
  dirs.push(d);
  return d;
}

async function start(options: Partial<ServeOptions>): Promise<RunningService> {
  const r = await startLoopbackService(options);
  running.push(r);
  return r;
}

const rules = (domain: string, perMinute: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: minute\n      requests_per_unit: ${perMinute}\n`;

/** The configured limit `/json` answers for (domain, tenant=t); undefined when no rule applies. */
async function limitOf(svc: RunningService, domain: string): Promise<number | undefined> {
  const r = await fetch(`http://127.0.0.1:${svc.httpPort}/json`, {
    method: 'POST',
    body: JSON.stringify({ domain, descriptors: [{ entries: [{ key: 'tenant', value: 't' }] }] }),
  });
  const body = (await r.json()) as {
    statuses: { currentLimit?: { requestsPerUnit?: number } }[];
  };
  return body.statuses[0]?.currentLimit?.requestsPerUnit;
}

/** `sluice_config_load_total` by result, read from the service's `/metrics`. */
async function loads(svc: RunningService): Promise<{ success: number; error: number }> {
  const text = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
  const value = (result: string) =>
    Number(
      new RegExp(`^sluice_config_load_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ??
        0,
    );
  return { success: value('success'), error: value('error') };
}

/** Waits until `n` loads succeeded, then says how many did: exactly `n` unless one was spurious. */
async function loadedTimes(svc: RunningService, n: number): Promise<number> {
  await waitFor(
    async (report) => {
      const { success } = await loads(svc);
      report(`${success} successful loads`);
      return success >= n ? true : undefined;
    },
    { what: `${n} successful config loads (the watcher saw the change)`, timeoutMs: 5_000 },
  );
  return (await loads(svc)).success;
}

/**
 * Proves no late duplicate reload followed the last change: one more change (`sentinel`,
 * which sets domain `rule` to `limit`) is made and awaited; reloads are run in order, so a
 * duplicate of an earlier change would have been counted before the sentinel's, and the
 * count is then exactly one more than `expected`. No sleep: on a busy machine a fixed wait
 * may end before a late duplicate shows.
 */
async function noLateReload(
  svc: RunningService,
  expected: number,
  sentinel: () => void,
  rule: string,
  limit: number,
): Promise<void> {
  sentinel();
  await waitFor(async () => ((await limitOf(svc, rule)) === limit ? true : undefined), {
    what: `the sentinel change (${rule} = ${limit}) loaded`,
    timeoutMs: 10_000,
  });
  expect(await loads(svc)).toEqual({ success: expected + 1, error: 0 });
}

describe('--config FILE', () => {
  it('reloads on an in-place write, three renames in a row, two `sed -i` and a write after them', async () => {
    const dir = tempDir();
    const file = join(dir, 'config.yaml');
    writeFileSync(file, rules('svc', 10));
    const svc = await start({ envoyConfig: file });
    expect(await limitOf(svc, 'svc')).toBe(10);
    let expected = 1; // the start-up load
    expect((await loads(svc)).success).toBe(expected);

    writeFileSync(file, rules('svc', 11)); // in place: same inode
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    expect(await limitOf(svc, 'svc')).toBe(11);

    for (const n of [12, 13, 14]) {
      // Atomic replace: a new inode renamed over the watched name.
      writeFileSync(`${file}.tmp`, rules('svc', n));
      renameSync(`${file}.tmp`, file);
      expect(await loadedTimes(svc, ++expected)).toBe(expected);
      expect(await limitOf(svc, 'svc')).toBe(n);
    }

    for (const [from, to] of [
      [14, 15],
      [15, 16],
    ] as const) {
      // GNU sed -i writes a temporary file in the same directory and renames it over.
      const sed = spawnSync('sed', [
        '-i',
        `s/requests_per_unit: ${from}/requests_per_unit: ${to}/`,
        file,
      ]);
      expect(sed.status).toBe(0);
      expect(await loadedTimes(svc, ++expected)).toBe(expected);
      expect(await limitOf(svc, 'svc')).toBe(to);
    }

    writeFileSync(file, rules('svc', 17));
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    expect(await limitOf(svc, 'svc')).toBe(17);
    await noLateReload(svc, expected, () => writeFileSync(file, rules('svc', 18)), 'svc', 18);
    console.log(
      `[reload] --config FILE: 1 write + 3 renames + 2 sed -i + 1 write = 7 changes, ${expected - 1} reloads`,
    );
  });

  it('reloads a file reached through a swapped symlink (the Kubernetes ConfigMap layout)', async () => {
    const dir = tempDir();
    // config.yaml -> ..data/config.yaml, ..data -> ..v1; an update writes ..v2 and swaps ..data.
    mkdirSync(join(dir, '..v1'));
    writeFileSync(join(dir, '..v1', 'config.yaml'), rules('svc', 20));
    symlinkSync('..v1', join(dir, '..data'));
    symlinkSync(join('..data', 'config.yaml'), join(dir, 'config.yaml'));
    const svc = await start({ envoyConfig: join(dir, 'config.yaml') });
    expect(await limitOf(svc, 'svc')).toBe(20);
    for (const [i, n] of [21, 22, 23].entries()) {
      const v = `..v${i + 2}`;
      mkdirSync(join(dir, v));
      writeFileSync(join(dir, v, 'config.yaml'), rules('svc', n));
      symlinkSync(v, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      expect(await loadedTimes(svc, i + 2)).toBe(i + 2);
      expect(await limitOf(svc, 'svc')).toBe(n);
    }
  });
});

describe('--config DIR', () => {
  it('reloads on a new file, a rename over a file and a removed file', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.yaml'), rules('a', 30));
    const svc = await start({ envoyConfig: dir });
    expect(await limitOf(svc, 'b')).toBeUndefined();

    writeFileSync(join(dir, 'b.yaml'), rules('b', 31));
    expect(await loadedTimes(svc, 2)).toBe(2);
    expect(await limitOf(svc, 'b')).toBe(31);

    writeFileSync(join(dir, '.a.yaml.swp'), rules('a', 32));
    renameSync(join(dir, '.a.yaml.swp'), join(dir, 'a.yaml'));
    expect(await loadedTimes(svc, 3)).toBe(3);
    expect(await limitOf(svc, 'a')).toBe(32);

    rmSync(join(dir, 'b.yaml'));
    expect(await loadedTimes(svc, 4)).toBe(4);
    expect(await limitOf(svc, 'b')).toBeUndefined();
  });
});

/**
 * Upstream's runtime layout: RUNTIME_ROOT is a symlink to one version of the data, swapped
 * on deploy (a new link renamed over it), with the rules in
 * RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
 */
describe.each([true, false])('RUNTIME_ROOT layout, RUNTIME_WATCH_ROOT=%s', (watchRoot) => {
  it('reloads on three root swaps in a row, then on files added and edited under config/', async () => {
    const base = tempDir();
    const version = (v: string, perMinute: number) => {
      mkdirSync(join(base, v, 'ratelimit', 'config'), { recursive: true });
      writeFileSync(join(base, v, 'ratelimit', 'config', 'svc.yaml'), rules('svc', perMinute));
    };
    const swap = (v: string) => {
      symlinkSync(join(base, v), join(base, 'current.tmp'));
      renameSync(join(base, 'current.tmp'), join(base, 'current'));
    };
    version('v1', 40);
    symlinkSync(join(base, 'v1'), join(base, 'current'));
    const svc = await start({
      env: {
        RUNTIME_ROOT: join(base, 'current'),
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        RUNTIME_WATCH_ROOT: String(watchRoot),
      },
    });
    expect(await limitOf(svc, 'svc')).toBe(40);
    let expected = 1;
    for (const [v, n] of [
      ['v2', 41],
      ['v3', 42],
      ['v4', 43],
    ] as const) {
      version(v, n);
      swap(v);
      expect(await loadedTimes(svc, ++expected)).toBe(expected);
      expect(await limitOf(svc, 'svc')).toBe(n);
    }
    // The watches followed the swap: files of v4 now count.
    const config = join(base, 'current', 'ratelimit', 'config');
    writeFileSync(join(config, 'extra.yaml'), rules('extra', 44));
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    expect(await limitOf(svc, 'extra')).toBe(44);
    writeFileSync(join(config, 'svc.yaml'), rules('svc', 45));
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    expect(await limitOf(svc, 'svc')).toBe(45);
    mkdirSync(join(config, 'team'));
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    writeFileSync(join(config, 'team', 'deep.yaml'), rules('deep', 46));
    expect(await loadedTimes(svc, ++expected)).toBe(expected);
    expect(await limitOf(svc, 'deep')).toBe(46);
    await noLateReload(
      svc,
      expected,
      () => writeFileSync(join(config, 'team', 'deep.yaml'), rules('deep', 47)),
      'deep',
      47,
    );
    console.log(
      `[reload] RUNTIME_WATCH_ROOT=${watchRoot}: 3 swaps + 2 files + 1 directory + 1 nested file = 7 changes, ${expected - 1} reloads`,
    );
  });
});

describe('reload under load', () => {
  it('20 atomic rewrites during sustained traffic fail no call; an invalid file keeps the old rules', async () => {
    const dir = tempDir();
    cpSync(join(fixtures, 'reload'), dir, { recursive: true });
    const svc = await start({ envoyConfig: dir });
    const clients = connect(svc.grpcPort);
    const file = join(dir, 'config.yaml');
    const template = readFileSync(file, 'utf8');
    const withLimit = (n: number | string) =>
      template.replace(/requests_per_unit: \d+/, `requests_per_unit: ${n}`);
    const write = (text: string) => {
      writeFileSync(`${file}.tmp`, text);
      renameSync(`${file}.tmp`, file);
    };
    const request = (tenant: string) => ({
      domain: 'svc',
      descriptors: [{ entries: [{ key: 'tenant', value: tenant }] }],
    });
    const base = `http://127.0.0.1:${svc.httpPort}`;
    const counts = { ok: 0, over: 0 };
    const failures: string[] = [];
    let writing = true;
    const grpcLoop = async (n: number) => {
      for (let i = 0; writing; i++) {
        try {
          const r = await call<{ overallCode: string }>(
            clients.rls,
            'ShouldRateLimit',
            request(`g${n}-${i % 50}`),
          );
          if (r.overallCode === 'OK') counts.ok++;
          else if (r.overallCode === 'OVER_LIMIT') counts.over++;
          else failures.push(`grpc ${r.overallCode}`);
        } catch (e) {
          failures.push(`grpc ${(e as grpc.ServiceError).code} ${(e as Error).message}`);
        }
      }
    };
    const jsonLoop = async (n: number) => {
      for (let i = 0; writing; i++) {
        try {
          const r = await fetch(`${base}/json`, {
            method: 'POST',
            body: JSON.stringify(request(`j${n}-${i % 50}`)),
          });
          await r.text();
          if (r.status === 200) counts.ok++;
          else if (r.status === 429) counts.over++;
          else failures.push(`json ${r.status}`);
        } catch (e) {
          failures.push(`json ${(e as Error).message}`);
        }
      }
    };
    try {
      const loops = [grpcLoop(0), grpcLoop(1), jsonLoop(0), jsonLoop(1)];
      // The fixture starts at 1000; the rewrites go 1001 … 1020, each reload awaited.
      for (let i = 1; i <= 20; i++) {
        write(withLimit(1000 + i));
        expect(await loadedTimes(svc, 1 + i)).toBe(1 + i);
      }
      writing = false;
      await Promise.all(loops);
      const after = await loads(svc);
      console.log(
        `[reload] under load: ${counts.ok + counts.over} calls (OK=${counts.ok} OVER_LIMIT=${counts.over}), failed=${failures.length}, config loads success=${after.success} error=${after.error}`,
      );
      expect(failures).toEqual([]);
      expect(counts.ok).toBeGreaterThan(0);
      expect(after).toEqual({ success: 21, error: 0 });
      expect(await (await fetch(`${base}/rlconfig`)).text()).toContain(
        'svc.tenant: unit=MINUTE requests_per_unit=1020',
      );

      write(withLimit(1021).replace('unit: minute', 'unit: fortnight'));
      await waitFor(async () => ((await loads(svc)).error === 1 ? true : undefined), {
        what: 'the invalid rewrite to be rejected',
        timeoutMs: 5_000,
      });
      const r = await call<{
        overallCode: string;
        statuses: { currentLimit: { requestsPerUnit: number } | null }[];
      }>(clients.rls, 'ShouldRateLimit', request('after-invalid'));
      expect(r.overallCode).toBe('OK');
      expect(r.statuses[0]?.currentLimit?.requestsPerUnit).toBe(1020);
      expect(await loads(svc)).toEqual({ success: 21, error: 1 });
    } finally {
      writing = false;
      clients.close();
    }
  });
});
