import {
  checkServerIdentity,
  createSecureContext,
  type PeerCertificate,
  type SecureContextOptions,
} from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { PolicyError } from '../../core/errors.js';
import { readTlsFile, watchTlsFiles, type TlsFile } from '../tls-files.js';

/** The gRPC server's TLS, from upstream's settings. */
export interface GrpcTlsSettings {
  /** `GRPC_SERVER_TLS_CERT`: the server's certificate chain (PEM). */
  readonly certFile: string;
  /** `GRPC_SERVER_TLS_KEY`: its private key (PEM). */
  readonly keyFile: string;
  /**
   * `GRPC_CLIENT_TLS_CACERT`: CA certificates (PEM) that client certificates must chain
   * to. Set: mutual TLS, a client without such a certificate is refused at the handshake.
   */
  readonly clientCaFile?: string;
  /**
   * `GRPC_CLIENT_TLS_SAN`: with mutual TLS, a DNS name the client certificate must carry
   * (checked like a host name, wildcards included); any other client gets
   * `UNAUTHENTICATED`.
   */
  readonly clientSan?: string;
}

/**
 * Why a verified client certificate does not satisfy `san`, or undefined when it does:
 * it must name `san` among its DNS names (matched as a host name, wildcards included).
 * A certificate whose extended key usage excludes client authentication never gets here:
 * OpenSSL refuses it at the handshake.
 */
export function clientSanProblem(
  cert: PeerCertificate | undefined,
  san: string,
): string | undefined {
  if (cert === undefined) return 'no verified client certificate';
  if (checkServerIdentity(san, cert) === undefined) return undefined;
  return `the client certificate does not name ${san} (its names: ${cert.subjectaltname ?? 'none'})`;
}

/**
 * gRPC server credentials whose certificate, key and client CA are re-read when their
 * files change: new connections get the new ones, open connections keep theirs. A change
 * that does not load (a key that does not match the new certificate yet, half a file) is
 * ignored until the files agree; `onReload` hears each outcome.
 */
export class ReloadingServerCredentials extends grpc.ServerCredentials {
  readonly #files: readonly TlsFile[];
  readonly #clientSan: string | undefined;
  readonly #stop: () => void;

  constructor(
    settings: GrpcTlsSettings,
    onReload: (error: Error | undefined) => void = () => undefined,
  ) {
    const files: TlsFile[] = [
      { setting: 'GRPC_SERVER_TLS_CERT', path: settings.certFile },
      { setting: 'GRPC_SERVER_TLS_KEY', path: settings.keyFile },
      ...(settings.clientCaFile === undefined
        ? []
        : [{ setting: 'GRPC_CLIENT_TLS_CACERT', path: settings.clientCaFile }]),
    ];
    const mutual = settings.clientCaFile !== undefined;
    super({ requestCert: mutual, rejectUnauthorized: mutual }, startingOptions(files));
    this.#files = files;
    this.#clientSan = mutual && settings.clientSan !== '' ? settings.clientSan : undefined;
    this.#stop = watchTlsFiles(files, () => {
      try {
        this.updateSecureContextOptions(contextOptions(this.#files));
        onReload(undefined);
      } catch (error) {
        onReload(error as Error);
      }
    });
  }

  /** Stops watching the files. */
  close(): void {
    this.#stop();
  }

  override _getInterceptors(): grpc.ServerInterceptor[] {
    const san = this.#clientSan;
    if (san === undefined) return [];
    return [
      (_method, call) =>
        new grpc.ServerInterceptingCall(call, {
          start: (next) => {
            const problem = clientSanProblem(call.getAuthContext().sslPeerCertificate, san);
            if (problem === undefined) {
              next();
              return;
            }
            call.sendStatus({
              code: grpc.status.UNAUTHENTICATED,
              details: `GRPC_CLIENT_TLS_SAN: ${problem}`,
              metadata: new grpc.Metadata(),
            });
          },
        }),
    ];
  }

  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

/** {@link contextOptions} at start: a problem is a setting's, named. */
function startingOptions(files: readonly TlsFile[]): SecureContextOptions {
  try {
    return contextOptions(files);
  } catch (error) {
    if (error instanceof PolicyError) throw error;
    const message = `${files.map((f) => f.path).join(', ')} do not load together: ${(error as Error).message}`;
    throw new PolicyError(
      'SLUICE_ERR_CONFIG_INVALID',
      `${files.map((f) => f.setting).join(', ')}: ${message}`,
      {
        issues: [{ path: files.map((f) => f.setting).join(', '), message }],
      },
    );
  }
}

/** The files read into context options; throws when they do not load together. */
function contextOptions(files: readonly TlsFile[]): SecureContextOptions {
  const [cert, key, ca] = files.map(readTlsFile);
  const options: SecureContextOptions = { cert, key, ...(ca === undefined ? {} : { ca }) };
  createSecureContext(options); // throws on a key that does not match, or a bad PEM
  return options;
}
