/**
 * The `sluice serve` flags that no other test passes on the command line, each through the
 * spawned CLI (the built dist/; `npm run build` first): one running service shows that
 * each took effect, by behaviour or by `/status`; a bad value of each is refused before a
 * port opens, naming the flag. The lease flags are shown against a real RLQS server on
 * loopback (the controller core behind `sluice controller`) whose domain only the flag
 * names.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { QuotaController } from '../../src/quota/controller.js';
import { startRlqsServer } from '../support/rlqs-server.js';
import { spawnServe, stopServe, type Serve } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';
import { runSluice, SERVE_ENV } from './run-sluice.js';

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const CONFIG = `domain: svc
descriptors:
  - key: generic_key
    value: flags
    rate_limit: { unit: second, requests_per_unit: 100 }
    sluice: { name: flags-api, algorithm: token-bucket }
`;

/** Resolves whether a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Sends an unfinished request head and resolves with the first line the server answers. */
function unfinishedHeaders(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write('POST /json HTTP/1.1\r\nHost: x\r\n'); // the blank line never comes
    });
    let got = '';
    socket.on('data', (b: Buffer) => {
      got += b.toString();
      if (got.includes('\r\n')) {
        socket.destroy();
        resolve(got.slice(0, got.indexOf('\r\n')));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
  });
}

describe('sluice serve: each flag takes effect', () => {
  it('one service started with all of them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-serve-flags-'));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'config.yaml'), CONFIG);
    const controller = new QuotaController(
      { budgets: [{ bucket: 'policy=flags-api', ratePerSecond: 100 }] },
      1,
    );
    const rlqs = await startRlqsServer(controller, { domain: 'flags-domain', clock: systemClock });
    cleanup.push(rlqs.stop);

    const s: Serve = await spawnServe([
      ...['--config', join(dir, 'config.yaml')],
      // spawnServe's GRPC_HOST is 127.0.0.1: the flag wins over it.
      ...['--grpc-host', '127.0.0.2'],
      ...['--max-descriptor-key-length', '3', '--max-descriptor-value-length', '4'],
      ...['--http-headers-timeout', '300', '--http-keep-alive-timeout', '7000'],
      ...['--lease-controllers', `127.0.0.1:${rlqs.port}`, '--lease-policies', 'flags-api'],
      ...['--lease-domain', 'flags-domain', '--lease-agent', 'flag-agent'],
    ]);
    cleanup.push(() => stopServe(s));

    // --grpc-host: gRPC listens on 127.0.0.2 only.
    expect(await accepts('127.0.0.2', s.grpcPort)).toBe(true);
    expect(await accepts('127.0.0.1', s.grpcPort)).toBe(false);

    // --max-descriptor-key-length 3 and --max-descriptor-value-length 4.
    const ask = async (key: string, value: string) => {
      const r = await fetch(`http://127.0.0.1:${s.httpPort}/json`, {
        method: 'POST',
        body: JSON.stringify({ domain: 'any', descriptors: [{ entries: [{ key, value }] }] }),
      });
      return [r.status, await r.text()] as const;
    };
    expect((await ask('abc', 'vvvv'))[0]).toBe(200);
    expect(await ask('abcd', 'v')).toEqual([
      400,
      expect.stringContaining('key is 4 characters long; the limit is 3'),
    ]);
    expect(await ask('k', 'vvvvv')).toEqual([
      400,
      expect.stringContaining('value is 5 characters long; the limit is 4'),
    ]);

    // --http-keep-alive-timeout 7000: Node advertises it on every keep-alive response.
    const health = await fetch(`http://127.0.0.1:${s.httpPort}/healthcheck`);
    await health.text();
    expect(health.headers.get('keep-alive')).toBe('timeout=7');

    // --http-headers-timeout 300: unfinished headers get 408; with the default (10 s) the
    // answer could not come before 10 s had passed.
    const t0 = performance.now();
    expect(await unfinishedHeaders(s.httpPort)).toBe('HTTP/1.1 408 Request Timeout');
    expect(performance.now() - t0).toBeLessThan(10_000);

    // --lease-controllers, --lease-domain, --lease-agent: the rule takes its lease from
    // that controller (which answers only its own domain), under that agent name.
    const row = await waitFor(
      async () => {
        const r = await fetch(`http://127.0.0.1:${s.httpPort}/status?format=json`);
        const body = (await r.json()) as {
          leases: { allocations: { mode: string; holder: string; controller: string | null }[] };
        };
        const a = body.leases.allocations[0];
        return a?.mode === 'lease' ? a : undefined;
      },
      { what: 'a lease from the controller named by the flags', timeoutMs: 15_000 },
    );
    expect(row).toMatchObject({
      holder: 'flag-agent/flags-api',
      controller: `127.0.0.1:${rlqs.port}`,
    });
  }, 60_000);
});

const BAD: readonly [flag: string, value: string][] = [
  ['--grpc-host', 'not a host!'],
  ['--max-descriptor-key-length', '0'],
  ['--max-descriptor-value-length', 'many'],
  ['--http-headers-timeout', '-1'],
  ['--http-keep-alive-timeout', 'soon'],
  ['--lease-controllers', 'nowhere'],
];

describe.concurrent('sluice serve: a bad value names its flag', () => {
  for (const [flag, value] of BAD) {
    it(`${flag} ${value}`, async () => {
      const args = ['serve', '--config', 'examples/envoy', flag, value];
      if (flag === '--lease-controllers') args.push('--lease-policies', 'x');
      const r = await runSluice(args, { env: { ...SERVE_ENV } });
      expect(r.served).toBe(false);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${flag}: `);
      expect(r.stderr).toContain('[SLUICE_ERR_CONFIG_INVALID]');
    });
  }
});
