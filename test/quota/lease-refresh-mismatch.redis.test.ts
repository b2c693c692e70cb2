/**
 * Settings that must agree: a `sluice serve` on `--lease-refresh 3000` against a
 * `sluice controller` on `--refresh-ms 1000` (real processes: the CLI spawned, a real
 * redis-server, RLQS over gRPC). The controller says its period in each stream's metadata
 * and the agent follows it, so it keeps a lease; the mismatch is in a log line on both
 * sides, on serve's `/status` and in the controller's metric. Stopped by PID.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/free-port.js';
import { RedisServer } from '../support/redis-server.js';
import { spawnServe, stopServe, type Serve } from '../support/sluice-serve.js';
import { waitFor } from '../support/wait.js';
import { call, connect, type Clients } from '../service/grpc/client.js';
import { controllerProcess, type JsonProcess } from './fixtures/json-process.js';

const CONFIG = `domain: edge
descriptors:
  - key: generic_key
    value: global
    rate_limit: { unit: second, requests_per_unit: 100 }
    sluice: { algorithm: token-bucket, name: global-api }
`;
const request = {
  domain: 'edge',
  descriptors: [{ entries: [{ key: 'generic_key', value: 'global' }] }],
};

let redis: RedisServer;
let dir: string;
let controller: JsonProcess | undefined;
let serve: Serve | undefined;
let clients: Clients | undefined;
beforeAll(async () => {
  redis = await RedisServer.start();
  dir = await mkdtemp(join(tmpdir(), 'sluice-refresh-'));
  await writeFile(join(dir, 'envoy.yaml'), CONFIG);
});
afterAll(async () => {
  clients?.close();
  if (serve !== undefined) await stopServe(serve);
  controller?.kill('SIGKILL');
  await controller?.ended();
  await redis.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Row {
  mode: string;
  refreshMs?: number;
  refreshMismatch?: { agentMs: number; controllerMs: number };
}

describe('lease refresh settings that disagree', () => {
  it('an agent on 3000 ms against a controller on 1000 ms follows the controller, keeps its lease and admits, and the mismatch is visible', async () => {
    const port = await freePort();
    controller = controllerProcess('c1', [
      ...['--redis', redis.url, '--domain', 'sluice', '--budget', 'policy=global-api@100'],
      ...['--port', String(port), '--refresh-ms', '1000'],
    ]);
    const listening = await controller.waitFor((l) => l['event'] === 'listening', 10_000);
    await controller.waitFor((l) => l['event'] === 'leader', 10_000);
    serve = await spawnServe(
      ['--config', join(dir, 'envoy.yaml'), '--lease-policies', 'global-api'],
      {
        SLUICE_LEASE_CONTROLLERS: `127.0.0.1:${port}`,
        SLUICE_LEASE_REFRESH_MS: '3000',
        SLUICE_LEASE_FALLBACK: 'deny',
      },
    );
    clients = connect(serve.grpcPort);
    const row = async (): Promise<Row> => {
      const r = await fetch(`http://127.0.0.1:${serve!.httpPort}/status?format=json`);
      return ((await r.json()) as { leases: { allocations: Row[] } }).leases.allocations[0]!;
    };
    await waitFor(async () => ((await row()).mode === 'lease' ? true : undefined), {
      what: 'a first lease',
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    // 8 s: beyond the controller's idle rule (2 × 1 s without a report) and the lease TTL
    // (3 s), which an agent reporting every 3 s would fall foul of. One call per 200 ms;
    // the lease admits up to its share each 1 s window, so a call in every second is OK.
    const answers: { atMs: number; ok: boolean; mode: string }[] = [];
    const endMs = Date.now() + 8_000;
    while (Date.now() < endMs) {
      const r = await call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', request);
      answers.push({ atMs: Date.now(), ok: r.overallCode === 'OK', mode: (await row()).mode });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const seconds = new Map<number, number>();
    for (const a of answers) {
      const s = Math.floor(a.atMs / 1000);
      seconds.set(s, (seconds.get(s) ?? 0) + (a.ok ? 1 : 0));
    }
    const full = [...seconds].slice(1, -1); // the first and last second are partial
    expect(full.length).toBeGreaterThanOrEqual(6);
    for (const [, admitted] of full) expect(admitted).toBeGreaterThan(0);
    expect(answers.every((a) => a.mode === 'lease')).toBe(true);

    const r = await row();
    expect(r.refreshMs).toBe(1000);
    expect(r.refreshMismatch).toEqual({ agentMs: 3000, controllerMs: 1000 });
    const serveLog = serve.stdout.join('');
    expect(serveLog).toContain('"event":"settings_mismatch"');
    const seen = await controller.waitFor((l) => l['event'] === 'settings_mismatch', 5_000);
    expect(seen).toMatchObject({ setting: 'refresh-ms', agentMs: 3000, controllerMs: 1000 });
    const metrics = await (
      await fetch(`http://127.0.0.1:${listening['httpPort'] as number}/metrics`)
    ).text();
    expect(metrics).toMatch(
      /^sluice_controller_settings_mismatches_total\{setting="refresh-ms"\} [1-9]/m,
    );
  }, 60_000);
});
