/** The xDS settings (`CONFIG_TYPE` and upstream's `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*`). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../../src/core/errors.js';
import { readServiceSettings } from '../../../src/service/env-settings.js';
import { readXdsTlsFiles } from '../../../src/service/xds/xds-tls-files.js';

function issuesOf(run: () => unknown): [string, string][] {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return (e as PolicyError).issues.map((i) => [i.path, i.message]);
  }
  throw new Error('expected a PolicyError');
}

describe('xDS settings', () => {
  it("CONFIG_TYPE=FILE (the default) reads no xDS setting's value into the result", () => {
    expect(readServiceSettings({}).xds).toBeUndefined();
    expect(readServiceSettings({ CONFIG_TYPE: 'FILE' }).xds).toBeUndefined();
  });

  it("GRPC_XDS_SOTW has upstream's defaults", () => {
    expect(readServiceSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' }).xds).toEqual({
      serverUrl: 'localhost:18000',
      nodeId: 'default',
      nodeMetadata: {},
      headers: {},
      backoff: { initialMs: 10_000, maxMs: 60_000, randomFactor: 0.5, jitter: true },
      maxMessageBytes: 0,
      forceStart: false,
    });
  });

  it('reads every xDS setting, Go durations included', () => {
    expect(
      readServiceSettings({
        CONFIG_TYPE: 'grpc_xds_sotw',
        CONFIG_GRPC_XDS_SERVER_URL: 'xds.internal:18000',
        CONFIG_GRPC_XDS_NODE_ID: 'rl-1',
        CONFIG_GRPC_XDS_NODE_METADATA: 'zone=eu-1,role=rl=x',
        CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'authorization:Bearer t',
        CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
        CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/ca.pem',
        CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'xds.example',
        XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '1.5s',
        XDS_CLIENT_BACKOFF_MAX_INTERVAL: '1m30s',
        XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '0',
        XDS_CLIENT_BACKOFF_JITTER: 'false',
        XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '8388608',
        FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      }).xds,
    ).toEqual({
      serverUrl: 'xds.internal:18000',
      nodeId: 'rl-1',
      nodeMetadata: { zone: 'eu-1', role: 'rl=x' },
      headers: { authorization: 'Bearer t' },
      backoff: { initialMs: 1_500, maxMs: 90_000, randomFactor: 0, jitter: false },
      maxMessageBytes: 8_388_608,
      forceStart: true,
      tls: {
        caCertFile: '/ca.pem',
        clientCertFile: '',
        clientKeyFile: '',
        serverName: 'xds.example',
      },
    });
  });

  it('names each bad value', () => {
    expect(
      issuesOf(() =>
        readServiceSettings({
          CONFIG_TYPE: 'xds',
          CONFIG_GRPC_XDS_NODE_METADATA: 'zone',
          XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '10',
          XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '2',
        }),
      ),
    ).toEqual([
      ['CONFIG_TYPE', 'expected FILE or GRPC_XDS_SOTW, got "xds"'],
      ['CONFIG_GRPC_XDS_NODE_METADATA', 'expected comma-separated key=value pairs, got "zone"'],
      [
        'XDS_CLIENT_BACKOFF_INITIAL_INTERVAL',
        'expected a duration such as 250ms, 10s or 1h30m, got "10"',
      ],
      ['XDS_CLIENT_BACKOFF_RANDOM_FACTOR', 'expected a number from 0 to 1, got "2"'],
    ]);
  });

  it('TLS files: read at start; a missing one, or a certificate without its key, is named', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-xds-tls-'));
    writeFileSync(join(dir, 'ca.pem'), 'CA');
    const tls = (more: object) => ({
      caCertFile: join(dir, 'ca.pem'),
      clientCertFile: '',
      clientKeyFile: '',
      serverName: '',
      ...more,
    });
    expect(readXdsTlsFiles(tls({}))).toEqual({ caCert: Buffer.from('CA') });
    expect(
      issuesOf(() => readXdsTlsFiles(tls({ clientCertFile: join(dir, 'missing.pem') }))),
    ).toEqual([
      [
        'CONFIG_GRPC_XDS_CLIENT_TLS_CERT',
        `cannot read ${join(dir, 'missing.pem')}: no such file or directory (ENOENT)`,
      ],
      [
        'CONFIG_GRPC_XDS_CLIENT_TLS_CERT, CONFIG_GRPC_XDS_CLIENT_TLS_KEY',
        'give both the client certificate and its key, or neither',
      ],
    ]);
  });
});
