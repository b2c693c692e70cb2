/**
 * CONFIG_TYPE=GRPC_XDS_SOTW end to end: the real service (startService) subscribes to a
 * test management server built from the official xDS protos, which pushes a config, a
 * changed one, a broken one, and then restarts on the same port. Every config the
 * service serves is proven with real RLS calls over gRPC.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningService } from '../../../src/service/main.js';
import { RATE_LIMIT_CONFIG_TYPE_URL } from '../../../src/service/xds/xds-protos.js';
import { startLoopbackService, stillClock } from '../../support/loopback-service.js';
import { spawnServe, stopServe } from '../../support/sluice-serve.js';
import { XdsManagementServer } from '../../support/xds-management-server.js';
import { call, connect, type Clients } from '../grpc/client.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** One domain `xds` with `tenant` limited to `perMinute`. */
const config = (perMinute: number, unit = 'MINUTE') => ({
  name: 'xds-rules',
  domain: 'xds',
  descriptors: [{ key: 'tenant', rateLimit: { unit, requestsPerUnit: perMinute } }],
});

/** The overall codes of `n` calls for tenant `t`. */
async function codes(clients: Clients, t: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await call<{ overallCode: string }>(clients.rls, 'ShouldRateLimit', {
      domain: 'xds',
      descriptors: [{ entries: [{ key: 'tenant', value: t }] }],
    });
    out.push(r.overallCode);
  }
  return out;
}

const admits = (n: number): string[] => [...Array<string>(n).fill('OK'), 'OVER_LIMIT'];

describe('xDS configuration (CONFIG_TYPE=GRPC_XDS_SOTW)', () => {
  it('subscribes over ADS, ACKs good configs, NACKs a broken one and keeps serving, reconnects after a restart', async () => {
    const server = await XdsManagementServer.start();
    cleanup.push(() => server.stop());
    const first = server.next();
    const starting = startLoopbackService({
      clock: stillClock(),
      xds: {
        serverUrl: `127.0.0.1:${server.port}`,
        nodeId: 'sluice-test',
        nodeMetadata: { zone: 'z1' },
        headers: { 'x-team': 'rate-limits' },
        backoff: { initialMs: 20, maxMs: 200, randomFactor: 0.5, jitter: true },
        maxMessageBytes: 0,
      },
    });
    const started: { svc?: RunningService } = {};
    // Start-up never ends without a first config: a test failing before it must not wait.
    cleanup.push(async () =>
      started.svc === undefined ? void starting.then((s) => s.shutdown()) : started.svc.shutdown(),
    );

    // The subscription, as upstream's: the node, the type URL, all resources, no version yet.
    const hello = await first;
    expect(hello).toMatchObject({
      versionInfo: '',
      typeUrl: RATE_LIMIT_CONFIG_TYPE_URL,
      resourceNames: [],
      responseNonce: '',
      errorDetail: null,
      node: { id: 'sluice-test', metadata: { fields: { zone: { stringValue: 'z1' } } } },
    });
    expect(server.streamHeaders[0]!.get('x-team')).toEqual(['rate-limits']);

    // Start-up waits for the first config; the ACK carries its version and nonce.
    const ack1 = await server.push('v1', [config(2)]);
    expect(ack1).toMatchObject({ versionInfo: 'v1', responseNonce: 'n1', errorDetail: null });
    const svc = (started.svc = await starting);
    const clients = connect(svc.grpcPort);
    cleanup.push(() => clients.close());
    expect(await codes(clients, 'a', 3)).toEqual(admits(2));

    const ack2 = await server.push('v2', [config(4)]);
    expect(ack2).toMatchObject({ versionInfo: 'v2', responseNonce: 'n2', errorDetail: null });
    expect(await codes(clients, 'b', 5)).toEqual(admits(4));

    // A broken config: NACKed with the previous version and upstream's message, named
    // after the resource; the last good config (4 a minute) keeps serving.
    const nack = await server.push('v3', [config(1, 'UNKNOWN')]);
    expect(nack.versionInfo).toBe('v2');
    expect(nack.responseNonce).toBe('n3');
    expect(nack.errorDetail?.message).toBe("xds-rules: invalid rate limit unit 'UNKNOWN'");
    expect(await codes(clients, 'c', 5)).toEqual(admits(4));

    // A resource of another type is NACKed too.
    const wrong = await server.push('v3b', [
      { type_url: 'type.googleapis.com/x.Y', value: Buffer.alloc(0) },
    ]);
    expect(wrong.errorDetail?.message).toContain(
      'resources[0]: type "type.googleapis.com/x.Y" is not',
    );
    expect(await codes(clients, 'd', 5)).toEqual(admits(4));

    // The management server restarts on the same port: the service opens a new stream,
    // from the last version it accepted, and takes the next config.
    server.stop();
    const again = await XdsManagementServer.start(server.port);
    cleanup.push(() => again.stop());
    const resubscribe = await again.next();
    expect(resubscribe).toMatchObject({
      versionInfo: 'v2',
      typeUrl: RATE_LIMIT_CONFIG_TYPE_URL,
      node: { id: 'sluice-test' },
    });
    expect(await codes(clients, 'e', 5)).toEqual(admits(4));
    const ack4 = await again.push('v4', [config(1)]);
    expect(ack4).toMatchObject({ versionInfo: 'v4', errorDetail: null });
    expect(await codes(clients, 'f', 2)).toEqual(admits(1));
    const loads = await (await fetch(`http://127.0.0.1:${svc.httpPort}/metrics`)).text();
    expect(loads).toMatch(/config_load.*success.* 3\n/);
    expect(loads).toMatch(/config_load.*error.* 2\n/);
  });

  it('sluice serve reads CONFIG_TYPE=GRPC_XDS_SOTW and the CONFIG_GRPC_XDS_* settings', async () => {
    const server = await XdsManagementServer.start();
    cleanup.push(() => server.stop());
    // serve opens its ports only after the first config: push it when the stream opens.
    void server.next().then(() => server.push('1', [config(1)]));
    const serve = await spawnServe([], {
      CONFIG_TYPE: 'grpc_xds_sotw',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${server.port}`,
      CONFIG_GRPC_XDS_NODE_ID: 'cli-node',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone=z2,team=rl',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x-team:rate-limits',
    });
    cleanup.push(() => stopServe(serve));
    expect(server.requests[0]!.node).toMatchObject({
      id: 'cli-node',
      metadata: { fields: { zone: { stringValue: 'z2' }, team: { stringValue: 'rl' } } },
    });
    expect(server.streamHeaders[0]!.get('x-team')).toEqual(['rate-limits']);
    const clients = connect(serve.grpcPort);
    cleanup.push(() => clients.close());
    expect(await codes(clients, 'a', 2)).toEqual(admits(1));
    const rlconfig = await (await fetch(`http://127.0.0.1:${serve.httpPort}/rlconfig`)).text();
    expect(rlconfig).toContain('xds.tenant: unit=MINUTE requests_per_unit=1');
  });
});
