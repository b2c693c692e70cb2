import { createSecureContext, type ConnectionOptions } from 'node:tls';
import { PolicyError } from '../core/errors.js';
import { readTlsFile, watchTlsFiles, type TlsFile } from './tls-files.js';

/** TLS to Redis, from upstream's settings (`REDIS_TLS` on, or a `rediss://` URL). */
export interface RedisTlsSettings {
  /** `REDIS_TLS_CACERT`: CA certificates (PEM) to verify Redis with, instead of the system's. */
  readonly caFile?: string;
  /** `REDIS_TLS_CLIENT_CERT`: a client certificate (PEM), for servers that ask for one. */
  readonly certFile?: string;
  /** `REDIS_TLS_CLIENT_KEY`: its private key (PEM). */
  readonly keyFile?: string;
  /**
   * `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`: the chain is still verified, the host name
   * is not (for services whose certificate names another host, like GCP Memorystore).
   */
  readonly skipHostnameVerification: boolean;
}

/** The node:tls options for Redis, and the watch that keeps them current. */
export interface RedisTls {
  /**
   * The options given to ioredis. Its connector reads them at each connect, so they are
   * updated in place when a file changes: the next connection uses the new files.
   */
  readonly tls: ConnectionOptions;
  /** Stops watching the files. */
  close(): void;
}

/**
 * Reads the TLS files for Redis (a problem names its setting) and watches them: a change
 * that loads is used from the next connection on; `onReload` hears each outcome.
 */
export function redisTls(
  settings: RedisTlsSettings,
  onReload: (error: Error | undefined) => void = () => undefined,
): RedisTls {
  const files: (TlsFile | undefined)[] = [
    settings.caFile === undefined
      ? undefined
      : { setting: 'REDIS_TLS_CACERT', path: settings.caFile },
    settings.certFile === undefined
      ? undefined
      : { setting: 'REDIS_TLS_CLIENT_CERT', path: settings.certFile },
    settings.keyFile === undefined
      ? undefined
      : { setting: 'REDIS_TLS_CLIENT_KEY', path: settings.keyFile },
  ];
  if ((settings.certFile === undefined) !== (settings.keyFile === undefined)) {
    const message = 'give both the client certificate and its key, or neither';
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      `REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY: ${message}`,
      { issues: [{ path: 'REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY', message }] },
    );
  }
  const read = (): ConnectionOptions => {
    const [ca, cert, key] = files.map((f) => (f === undefined ? undefined : readTlsFile(f)));
    const options: ConnectionOptions = {
      ...(ca === undefined ? {} : { ca }),
      ...(cert === undefined ? {} : { cert, key }),
    };
    createSecureContext(options); // throws on a key that does not match, or a bad PEM
    return options;
  };
  const tls: ConnectionOptions = {
    ...read(),
    ...(settings.skipHostnameVerification ? { checkServerIdentity: () => undefined } : {}),
  };
  const watched = files.filter((f): f is TlsFile => f !== undefined);
  const stop =
    watched.length === 0
      ? () => undefined
      : watchTlsFiles(watched, () => {
          try {
            Object.assign(tls, read());
            onReload(undefined);
          } catch (error) {
            onReload(error as Error);
          }
        });
  return { tls, close: stop };
}
