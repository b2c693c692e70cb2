import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { fsProblem } from '../config/read-file.js';
import { PolicyError, formatIssue, type PolicyIssue } from '../core/errors.js';

/** TLS of a gRPC client (to an xDS server, to a quota controller), files read. */
export interface GrpcClientTls {
  /** CA certificates (PEM) that sign the server's; absent: the system's roots. */
  readonly caCert?: Buffer;
  /** Client certificate and key (PEM), for mTLS; both or neither. */
  readonly clientCert?: Buffer;
  readonly clientKey?: Buffer;
  /** The name the server's certificate must carry, when not the target's host. */
  readonly serverName?: string;
}

/** The files of a {@link GrpcClientTls} as settings name them ('' when unset). */
export interface GrpcClientTlsFiles {
  readonly caCertFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  readonly serverName: string;
}

/**
 * Reads the files. Throws `PolicyError` (`SLUICE_ERR_CONFIG_READ`) naming the variable
 * of each file that cannot be read, and a client certificate given without its key (or
 * the key without the certificate).
 */
export function readGrpcClientTlsFiles(
  files: GrpcClientTlsFiles,
  variables: { readonly caCert: string; readonly clientCert: string; readonly clientKey: string },
): GrpcClientTls {
  const issues: PolicyIssue[] = [];
  const read = (variable: string, path: string): Buffer | undefined => {
    if (path === '') return undefined;
    try {
      return readFileSync(path);
    } catch (e) {
      issues.push({ path: variable, message: `cannot read ${path}: ${fsProblem(e)}` });
      return undefined;
    }
  };
  const caCert = read(variables.caCert, files.caCertFile);
  const clientCert = read(variables.clientCert, files.clientCertFile);
  const clientKey = read(variables.clientKey, files.clientKeyFile);
  if ((files.clientCertFile === '') !== (files.clientKeyFile === '')) {
    issues.push({
      path: `${variables.clientCert}, ${variables.clientKey}`,
      message: 'give both the client certificate and its key, or neither',
    });
  }
  if (issues.length > 0) {
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', issues.map(formatIssue).join('\n'), {
      issues,
    });
  }
  return {
    ...(caCert === undefined ? {} : { caCert }),
    ...(clientCert === undefined ? {} : { clientCert }),
    ...(clientKey === undefined ? {} : { clientKey }),
    ...(files.serverName === '' ? {} : { serverName: files.serverName }),
  };
}

/** The credentials and channel options of a client with `tls` (absent: plaintext). */
export function grpcClientChannel(tls: GrpcClientTls | undefined): {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
} {
  if (tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
  return {
    credentials: grpc.credentials.createSsl(
      tls.caCert ?? null,
      tls.clientKey ?? null,
      tls.clientCert ?? null,
    ),
    options:
      tls.serverName === undefined
        ? {}
        : {
            'grpc.ssl_target_name_override': tls.serverName,
            'grpc.default_authority': tls.serverName,
          },
  };
}
