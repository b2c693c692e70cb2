/**
 * TLS with real processes and certificates made here with openssl: redis-server on a
 * `tls-port` asking for client certificates, the service's store connected to it from
 * upstream's settings; the service's gRPC server with TLS, with mutual TLS and the
 * client-certificate name (`GRPC_CLIENT_TLS_SAN`); a client with the wrong CA is refused;
 * a certificate rotated on disk is served to new connections without a restart.
 */
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readServiceSettings } from '../../src/service/env-settings.js';
import { RLS_SERVICE } from '../../src/protocol/protos.js';
import { startService, type RunningService } from '../../src/service/main.js';
import { RedisStore } from '../../src/stores/redis/redis-store.js';
import { freePort } from '../support/free-port.js';
import { RedisServer, stopAllRedisServers } from '../support/redis-server.js';
import { issueCert, makeCa, type TestCa, type TestCert } from '../support/test-certs.js';
import { waitFor } from '../support/wait.js';
import { call } from './grpc/client.js';

const fixture = path.join(import.meta.dirname, 'fixtures/redis-svc');
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse())
    await Promise.resolve()
      .then(c)
      .catch(() => undefined);
});

let dir: string;
let ca: TestCa;
let wrongCa: TestCa;
// The long timeout: a fresh machine installs the Debian package first
// (test/support/debian-package.ts).
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-tls-'));
  [ca, wrongCa] = await Promise.all([makeCa(dir, 'ca'), makeCa(dir, 'wrong-ca')]);
}, 600_000);
afterAll(async () => {
  await stopAllRedisServers();
  fs.rmSync(dir, { recursive: true, force: true });
});

const Rls = grpc.makeGenericClientConstructor(RLS_SERVICE, 'RateLimitService');

/** ShouldRateLimit over TLS with `rootCa` (and a client certificate); the code or the error. */
/** A redis-server serving TLS on a port of its own with `server`'s certificate, asking
 * clients for one from `ca`; stopped after the test. */
async function startTlsRedis(server: TestCert): Promise<{ tlsPort: number; redis: RedisServer }> {
  const tlsPort = await freePort();
  const redis = await RedisServer.start({
    extraArgs: [
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      server.certFile,
      '--tls-key-file',
      server.keyFile,
      '--tls-ca-cert-file',
      ca.certFile,
      '--tls-auth-clients',
      'yes',
    ],
  });
  cleanups.push(() => redis.stop());
  return { tlsPort, redis };
}

async function ask(port: number, rootCa: Buffer, client?: TestCert): Promise<string> {
  const creds = grpc.credentials.createSsl(rootCa, client?.key ?? null, client?.cert ?? null);
  const rls = new Rls(`127.0.0.1:${port}`, creds);
  try {
    const r = await call<{ overallCode: string }>(
      rls,
      'ShouldRateLimit',
      { domain: 'svc', descriptors: [{ entries: [{ key: 'tenant', value: 'a' }] }] },
      3_000,
    );
    return r.overallCode;
  } catch (e) {
    const error = e as grpc.ServiceError;
    return `${grpc.status[error.code]}: ${error.details}`;
  } finally {
    rls.close();
  }
}

async function serve(options: Parameters<typeof startService>[0]): Promise<RunningService> {
  const svc = await startService({
    envoyConfig: fixture,
    host: '127.0.0.1',
    grpcHost: '127.0.0.1',
    port: 0,
    grpcPort: 0,
    logger: pino({ level: 'silent' }),
    ...options,
  });
  cleanups.push(() => svc.shutdown());
  return svc;
}

/** The serial number of the certificate a new TLS connection to `port` is shown. */
function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      { host: '127.0.0.1', port, ca: ca.cert, ALPNProtocols: ['h2'] },
      () => {
        resolve(socket.getPeerCertificate().serialNumber);
        socket.destroy();
      },
    );
    socket.once('error', reject);
  });
}

describe('TLS to Redis', () => {
  it('REDIS_TLS with a CA, a client certificate and hostname verification skipped; the wrong CA and a wrong host name are refused', async () => {
    // The server's certificate names redis.internal only, as managed services' often name
    // another host than the address dialled.
    const server = await issueCert(dir, ca, 'redis-server', { dns: ['redis.internal'] });
    const client = await issueCert(dir, ca, 'redis-client', {
      dns: ['sluice'],
      usages: ['clientAuth'],
    });
    const { tlsPort, redis } = await startTlsRedis(server);
    const settings = readServiceSettings({
      REDIS_URL: `127.0.0.1:${tlsPort}`,
      REDIS_TLS: 'true',
      REDIS_TLS_CACERT: ca.certFile,
      REDIS_TLS_CLIENT_CERT: client.certFile,
      REDIS_TLS_CLIENT_KEY: client.keyFile,
      REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: 'true',
    });
    expect(settings.redisTls).toEqual({
      caFile: ca.certFile,
      certFile: client.certFile,
      keyFile: client.keyFile,
      skipHostnameVerification: true,
    });
    if (settings.redis?.type !== 'single') throw new Error('expected one server');
    const svc = await serve({ redis: settings.redis, redisTls: settings.redisTls! });
    const grpcPlain = new Rls(`127.0.0.1:${svc.grpcPort}`, grpc.credentials.createInsecure());
    cleanups.push(() => grpcPlain.close());
    const r = await call<{ overallCode: string }>(grpcPlain, 'ShouldRateLimit', {
      domain: 'svc',
      descriptors: [{ entries: [{ key: 'tenant', value: 'tls' }] }],
    });
    expect(r.overallCode).toBe('OK');
    // The decision was made on the TLS port's server.
    expect((await redis.client().keys('*')).length).toBe(1);

    // The wrong CA, and the right CA without skipping the host name check, never connect.
    const refusal = async (options: tls.ConnectionOptions): Promise<string> => {
      const store = RedisStore.connect(`redis://127.0.0.1:${tlsPort}`, {
        tls: { cert: client.cert, key: client.key, ...options },
      });
      cleanups.push(() => store.close());
      return new Promise<string>((resolve) => {
        void store.ready({ onError: (e) => resolve(e.message) });
      });
    };
    const [wrongCaError, hostError] = await Promise.all([
      refusal({ ca: wrongCa.cert }),
      refusal({ ca: ca.cert }),
    ]);
    console.log(
      `[tls] Redis with the wrong CA: ${wrongCaError}; with the right CA but 127.0.0.1 for redis.internal: ${hostError}`,
    );
    expect(wrongCaError).toMatch(/certificate/i);
    expect(hostError).toMatch(/Hostname\/IP does not match certificate's altnames/);
  });
});

describe('TLS to Redis: rotation', () => {
  it('a client certificate rotated on disk is used at the next connect, without a restart', async () => {
    const server = await issueCert(dir, ca, 'redis-server-2', {
      dns: ['localhost'],
      ips: ['127.0.0.1'],
    });
    const { tlsPort } = await startTlsRedis(server);
    // The service starts with a client certificate Redis does not trust, so it waits.
    const client = await issueCert(dir, wrongCa, 'sluice-client', {
      dns: ['sluice'],
      usages: ['clientAuth'],
    });
    const svc = await serve({
      redis: { type: 'single', url: `rediss://localhost:${tlsPort}` },
      redisTls: {
        caFile: ca.certFile,
        certFile: client.certFile,
        keyFile: client.keyFile,
        skipHostnameVerification: false,
      },
    });
    const healthy = async (): Promise<number> =>
      (await fetch(`http://127.0.0.1:${svc.httpPort}/healthcheck`)).status;
    expect(await healthy()).toBe(500);
    const rotatedAt = performance.now();
    await issueCert(dir, ca, 'sluice-client', { dns: ['sluice'], usages: ['clientAuth'] });
    await waitFor(async () => ((await healthy()) === 200 ? true : undefined), {
      what: 'the service to connect with the rotated client certificate',
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    console.log(
      `[tls] Redis client certificate rotated: connected ${Math.round(performance.now() - rotatedAt)}ms after the files changed`,
    );
  });
});

describe('TLS of the gRPC server', () => {
  it('GRPC_SERVER_USE_TLS: served over TLS; a client with the wrong CA is refused; a rotated certificate is picked up without a restart', async () => {
    const server = await issueCert(dir, ca, 'grpc-server', {
      dns: ['localhost'],
      ips: ['127.0.0.1'],
    });
    const settings = readServiceSettings({
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: server.certFile,
      GRPC_SERVER_TLS_KEY: server.keyFile,
    });
    const svc = await serve({ grpcTls: settings.grpcTls! });
    expect(await ask(svc.grpcPort, ca.cert)).toBe('OK');
    const wrong = await ask(svc.grpcPort, wrongCa.cert);
    console.log(`[tls] gRPC client with the wrong CA: ${wrong}`);
    expect(wrong).toMatch(/^UNAVAILABLE: /);

    const before = await servedSerial(svc.grpcPort);
    const rotatedAt = performance.now();
    const rotated = await issueCert(dir, ca, 'grpc-server', {
      dns: ['localhost'],
      ips: ['127.0.0.1'],
    });
    const after = await waitFor(
      async () => {
        const serial = await servedSerial(svc.grpcPort);
        return serial !== before ? serial : undefined;
      },
      { what: 'the rotated certificate to be served', timeoutMs: 10_000, intervalMs: 100 },
    );
    console.log(
      `[tls] rotated gRPC certificate served ${Math.round(performance.now() - rotatedAt)}ms after the files changed (serial ${before} → ${after})`,
    );
    expect(after).toBe(new X509Certificate(rotated.cert).serialNumber);
    expect(await ask(svc.grpcPort, ca.cert)).toBe('OK');
  });

  it('mutual TLS (GRPC_CLIENT_TLS_CACERT) with GRPC_CLIENT_TLS_SAN: only a client certificate from the CA naming the SAN is served', async () => {
    const server = await issueCert(dir, ca, 'grpc-mtls-server', {
      dns: ['localhost'],
      ips: ['127.0.0.1'],
    });
    const envoy = await issueCert(dir, ca, 'envoy', {
      dns: ['envoy.client'],
      usages: ['clientAuth'],
    });
    const other = await issueCert(dir, ca, 'other', {
      dns: ['other.client'],
      usages: ['clientAuth'],
    });
    const serverOnly = await issueCert(dir, ca, 'server-only', {
      dns: ['envoy.client'],
      usages: ['serverAuth'],
    });
    const stranger = await issueCert(dir, wrongCa, 'stranger', {
      dns: ['envoy.client'],
      usages: ['clientAuth'],
    });
    const settings = readServiceSettings({
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: server.certFile,
      GRPC_SERVER_TLS_KEY: server.keyFile,
      GRPC_CLIENT_TLS_CACERT: ca.certFile,
      GRPC_CLIENT_TLS_SAN: 'envoy.client',
    });
    const svc = await serve({ grpcTls: settings.grpcTls! });
    const answers = {
      envoy: await ask(svc.grpcPort, ca.cert, envoy),
      noCert: await ask(svc.grpcPort, ca.cert),
      stranger: await ask(svc.grpcPort, ca.cert, stranger),
      other: await ask(svc.grpcPort, ca.cert, other),
      serverOnly: await ask(svc.grpcPort, ca.cert, serverOnly),
    };
    console.log(`[tls] mTLS answers: ${JSON.stringify(answers)}`);
    expect(answers.envoy).toBe('OK');
    expect(answers.noCert).toMatch(/^UNAVAILABLE: /);
    expect(answers.stranger).toMatch(/^UNAVAILABLE: /);
    expect(answers.other).toBe(
      'UNAUTHENTICATED: GRPC_CLIENT_TLS_SAN: the client certificate does not name envoy.client (its names: DNS:other.client)',
    );
    // A certificate not meant for clients (extended key usage) is refused at the handshake.
    expect(answers.serverOnly).toMatch(/^UNAVAILABLE: /);
  });

  it('refuses TLS settings that cannot work, naming them', () => {
    expect(() => readServiceSettings({ GRPC_SERVER_USE_TLS: 'true' })).toThrow(
      'invalid settings (2 issues):\n  GRPC_SERVER_TLS_CERT: required with GRPC_SERVER_USE_TLS=true\n  GRPC_SERVER_TLS_KEY: required with GRPC_SERVER_USE_TLS=true',
    );
    expect(() => readServiceSettings({ GRPC_CLIENT_TLS_CACERT: '/ca.pem' })).toThrow(
      'GRPC_CLIENT_TLS_CACERT: applies only with GRPC_SERVER_USE_TLS=true',
    );
    expect(() => readServiceSettings({ REDIS_TLS_CLIENT_CERT: '/c.pem' })).toThrow(
      'REDIS_TLS_CLIENT_KEY: give both REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY, or neither',
    );
  });
});
