/**
 * The rest of upstream's settings, each against the real service:
 * FORCE_START_WITHOUT_INITIAL_CONFIG with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED (over
 * xDS), GRPC_UDS, GRPC_MAX_CONNECTION_AGE(_GRACE) and DEBUG_PORT.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { RLS_SERVICE } from '../../src/protocol/protos.js';
import { startLoopbackService, stillClock } from '../support/loopback-service.js';
import { spawnServe, stopServe } from '../support/sluice-serve.js';
import { XdsManagementServer } from '../support/xds-management-server.js';
import { call, connect } from './grpc/client.js';

const config = join(import.meta.dirname, 'fixtures/statsd/stats.yaml');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const acme = { domain: 'stats', descriptors: [{ entries: [{ key: 'tenant', value: 'acme' }] }] };
const healthOf = async (httpPort: number): Promise<number> =>
  (await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status;

describe("upstream's remaining settings", () => {
  it('FORCE_START_WITHOUT_INITIAL_CONFIG serves before the first xDS config; HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED is unhealthy until one with a domain', async () => {
    const server = await XdsManagementServer.start();
    cleanup.push(() => server.stop());
    const opened = server.next();
    // No config is ever pushed before the service is up: start-up must not wait for one.
    const svc = await startLoopbackService({
      clock: stillClock(),
      healthyWithAtLeastOneConfigLoaded: true,
      xds: {
        serverUrl: `127.0.0.1:${server.port}`,
        nodeId: 'n',
        nodeMetadata: {},
        headers: {},
        backoff: { initialMs: 20, maxMs: 200, randomFactor: 0, jitter: false },
        maxMessageBytes: 0,
        forceStart: true,
      },
    });
    cleanup.push(() => svc.shutdown());
    const clients = connect(svc.grpcPort);
    cleanup.push(() => clients.close());
    expect(await healthOf(svc.httpPort)).toBe(500);
    expect(await call(clients.health, 'Check', { service: 'ratelimit' })).toEqual({
      status: 'NOT_SERVING',
    });
    const rls = () => call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', acme);
    expect((await rls()).overallCode).toBe('OK'); // no rules yet

    await opened;
    const rules = {
      name: 'stats',
      domain: 'stats',
      descriptors: [
        { key: 'tenant', value: 'acme', rateLimit: { unit: 'MINUTE', requestsPerUnit: 1 } },
      ],
    };
    expect((await server.push('1', [rules])).errorDetail).toBeNull();
    expect(await healthOf(svc.httpPort)).toBe(200);
    expect(await call(clients.health, 'Check', { service: 'ratelimit' })).toEqual({
      status: 'SERVING',
    });
    expect([(await rls()).overallCode, (await rls()).overallCode]).toEqual(['OK', 'OVER_LIMIT']);
    // A config with no domain at all: unhealthy again, as upstream.
    expect((await server.push('2', [])).errorDetail).toBeNull();
    expect(await healthOf(svc.httpPort)).toBe(500);
  });

  it('GRPC_UDS: sluice serve answers gRPC on a unix socket', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-uds-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const socket = join(dir, 'ratelimit.sock');
    const serve = await spawnServe(['--config', config], { GRPC_UDS: socket });
    cleanup.push(() => stopServe(serve));
    const Rls = grpc.makeGenericClientConstructor(RLS_SERVICE, 'RateLimitService');
    const client = new Rls(`unix:${socket}`, grpc.credentials.createInsecure());
    cleanup.push(() => client.close());
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      codes.push(
        (await call<{ overallCode: string }>(client, 'ShouldRateLimit', acme)).overallCode,
      );
    }
    expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  it('GRPC_MAX_CONNECTION_AGE: the server closes an old connection (GOAWAY) and the client reconnects', async () => {
    const svc = await startLoopbackService({
      envoyConfig: config,
      clock: stillClock(),
      grpcMaxConnectionAgeMs: 300,
      grpcMaxConnectionAgeGraceMs: 100,
    });
    cleanup.push(() => svc.shutdown());
    const clients = connect(svc.grpcPort);
    cleanup.push(() => clients.close());
    await call(clients.rls, 'ShouldRateLimit', acme);
    const channel = clients.rls.getChannel();
    expect(channel.getConnectivityState(false)).toBe(grpc.connectivityState.READY);
    // The connection is closed by the server, not by the client: the channel leaves READY.
    await new Promise<void>((resolve, reject) =>
      channel.watchConnectivityState(grpc.connectivityState.READY, Date.now() + 5_000, (e) =>
        e === undefined ? resolve() : reject(e),
      ),
    );
    expect(channel.getConnectivityState(false)).not.toBe(grpc.connectivityState.READY);
    expect(
      (await call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', acme)).overallCode,
    ).toBe('OK');
  });

  it('DEBUG_PORT: the debug listener lists its endpoints and serves /rlconfig and /stats', async () => {
    const svc = await startLoopbackService({
      envoyConfig: config,
      debug: { host: '127.0.0.1', port: 0 },
    });
    cleanup.push(() => svc.shutdown());
    const get = async (path: string) => {
      const r = await fetch(`http://127.0.0.1:${svc.debugPort}${path}`);
      return [r.status, await r.text()] as const;
    };
    expect(await get('/')).toEqual([
      200,
      '/rlconfig: print out the currently loaded configuration for debugging\n/stats: print out stats (the Prometheus exposition)\n',
    ]);
    const main = await (await fetch(`http://127.0.0.1:${svc.httpPort}/rlconfig`)).text();
    expect(await get('/rlconfig')).toEqual([200, main]);
    const [status, stats] = await get('/stats');
    expect(status).toBe(200);
    expect(stats).toContain('sluice_config_load_total{result="success"} 1');
    expect((await get('/debug/pprof/'))[0]).toBe(404);
  });
});
