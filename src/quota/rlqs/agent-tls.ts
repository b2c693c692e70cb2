import * as grpc from '@grpc/grpc-js';

/** TLS of a controller's RLQS port (`--tls-cert`, `--tls-key`, `--client-ca`). */
export interface AgentTls {
  readonly certFile: string;
  readonly keyFile: string;
  /** CA that verifies agents' client certificates; none: server TLS only. */
  readonly clientCaFile?: string;
  /**
   * Whether the handshake refuses a client without a verified certificate. False when
   * bearer tokens are accepted too: a client certificate is asked for, and the stream is
   * judged by a verified one or by its token. @default true
   */
  readonly requireClientCert?: boolean;
}

/** How often the certificate files are read again, so that a rotation needs no restart. */
const RELOAD_MS = 60_000;

/**
 * The server credentials of the RLQS port: plaintext without `tls`; otherwise TLS from
 * files watched for rotation, asking for (and verifying) client certificates when a
 * client CA is given.
 */
export function agentServerCredentials(tls: AgentTls | undefined): grpc.ServerCredentials {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  const { FileWatcherCertificateProvider, createCertificateProviderServerCredentials } =
    grpc.experimental;
  const identity = new FileWatcherCertificateProvider({
    certificateFile: tls.certFile,
    privateKeyFile: tls.keyFile,
    refreshIntervalMs: RELOAD_MS,
  });
  const ca =
    tls.clientCaFile === undefined
      ? null
      : new FileWatcherCertificateProvider({
          caCertificateFile: tls.clientCaFile,
          refreshIntervalMs: RELOAD_MS,
        });
  // grpc-js's declaration names the first two parameters the other way round; its
  // implementation takes the identity provider first, then the CA provider.
  return (
    createCertificateProviderServerCredentials as unknown as (
      identity: grpc.experimental.CertificateProvider,
      ca: grpc.experimental.CertificateProvider | null,
      requireClientCertificate: boolean,
    ) => grpc.ServerCredentials
  )(identity, ca, ca !== null && (tls.requireClientCert ?? true));
}
