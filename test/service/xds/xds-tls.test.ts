/**
 * CONFIG_GRPC_XDS_SERVER_USE_TLS with the CA, client certificate (mTLS) and SAN settings,
 * against a management server on TLS, with a CA and certificates made by openssl here.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startLoopbackService, stillClock } from '../../support/loopback-service.js';
import { ensureDebianCommand } from '../../support/debian-package.js';
import { XdsManagementServer } from '../../support/xds-management-server.js';
import { readXdsTlsFiles } from '../../../src/service/xds/xds-tls-files.js';
import { captureLog } from '../../support/captured-log.js';
import { waitFor } from '../../support/wait.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

let dir: string;
let openssl: string;
const file = (name: string): string => join(dir, name);

/** A CA (`<name>-ca`) and a certificate it signs for `cn` with `san`. */
function issue(ca: string, name: string, cn: string, san: string): void {
  const run = (...args: string[]) => execFileSync(openssl, args, { stdio: 'pipe' });
  run(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    `/CN=${ca}`,
    '-keyout',
    file(`${ca}.key`),
    '-out',
    file(`${ca}.pem`),
  );
  run(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    `/CN=${cn}`,
    '-keyout',
    file(`${name}.key`),
    '-out',
    file(`${name}.csr`),
  );
  writeFileSync(file(`${name}.ext`), `subjectAltName=${san}\n`);
  run(
    'x509',
    '-req',
    '-in',
    file(`${name}.csr`),
    '-CA',
    file(`${ca}.pem`),
    '-CAkey',
    file(`${ca}.key`),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    file(`${name}.ext`),
    '-out',
    file(`${name}.pem`),
  );
}

// The long timeout: a fresh machine installs the Debian package first
// (test/support/debian-package.ts).
beforeAll(async () => {
  openssl = await ensureDebianCommand('openssl', 'openssl');
  dir = mkdtempSync(join(tmpdir(), 'sluice-xds-tls-'));
  issue('ca', 'server', 'xds-server', 'DNS:xds.test');
  issue('client-ca', 'client', 'rate-limit', 'DNS:rate-limit');
  issue('other-ca', 'other', 'other', 'DNS:other');
  return () => rmSync(dir, { recursive: true, force: true });
}, 600_000);

const rules = {
  name: 'tls',
  domain: 'xds',
  descriptors: [{ key: 'tenant', rateLimit: { unit: 'MINUTE', requestsPerUnit: 1 } }],
};

async function tlsServer(): Promise<XdsManagementServer> {
  const server = await XdsManagementServer.start(
    0,
    grpc.ServerCredentials.createSsl(
      readFileSync(file('client-ca.pem')),
      [
        {
          cert_chain: readFileSync(file('server.pem')),
          private_key: readFileSync(file('server.key')),
        },
      ],
      true,
    ),
  );
  cleanup.push(() => server.stop());
  return server;
}

const xds = (port: number, caCertFile: string) => ({
  serverUrl: `127.0.0.1:${port}`,
  nodeId: 'tls-node',
  nodeMetadata: {},
  headers: {},
  backoff: { initialMs: 50, maxMs: 200, randomFactor: 0, jitter: false },
  maxMessageBytes: 0,
  forceStart: true,
  // The certificate names xds.test, not 127.0.0.1: the SAN setting says which name to check.
  tls: readXdsTlsFiles({
    caCertFile,
    clientCertFile: file('client.pem'),
    clientKeyFile: file('client.key'),
    serverName: 'xds.test',
  }),
});

describe('xDS over TLS', () => {
  it('subscribes over mTLS, checking the server certificate against the CA and the SAN', async () => {
    const server = await tlsServer();
    const first = server.next();
    const svc = await startLoopbackService({
      clock: stillClock(),
      xds: xds(server.port, file('ca.pem')),
    });
    cleanup.push(() => svc.shutdown());
    expect((await first).node.id).toBe('tls-node');
    expect((await server.push('1', [rules])).errorDetail).toBeNull();
  });

  it('a server certificate from another CA is refused, and so is a name other than the SAN', async () => {
    const server = await tlsServer();
    const wrongCa = captureLog('warn');
    const svc = await startLoopbackService({
      clock: stillClock(),
      logger: wrongCa.logger,
      xds: xds(server.port, file('other-ca.pem')),
    });
    cleanup.push(() => svc.shutdown());
    const reasons = await waitFor(
      () => {
        const lost = wrongCa.matching('xDS stream lost');
        return lost.length >= 2 ? lost.map((l) => String(l['reason'])) : undefined;
      },
      { what: 'two refused connection attempts', timeoutMs: 10_000 },
    );
    expect(reasons[0]).toMatch(/certificate/i);
    expect(server.requests).toEqual([]);

    const wrongName = captureLog('warn');
    const tls = { ...xds(server.port, file('ca.pem')) };
    const svc2 = await startLoopbackService({
      clock: stillClock(),
      logger: wrongName.logger,
      xds: { ...tls, tls: { ...tls.tls, serverName: 'not-xds.test' } },
    });
    cleanup.push(() => svc2.shutdown());
    const nameReasons = await waitFor(
      () => {
        const lost = wrongName.matching('xDS stream lost');
        return lost.length >= 1 ? lost.map((l) => String(l['reason'])) : undefined;
      },
      { what: 'a refused connection attempt', timeoutMs: 10_000 },
    );
    expect(nameReasons[0]).toMatch(/not-xds\.test|altnames|Hostname/i);
    expect(server.requests).toEqual([]);
  });
});
